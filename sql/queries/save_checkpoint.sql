-- A step's checkpoint that claims no run with it (checkpoint_landed.sql):
-- the checkpoint's version and status, the events written, the code of an
-- end it forced, and whether it let go of the stack lock. A statement of its
-- own, not save_checkpoint_and_claim.sql with a null claim: PostgreSQL sets
-- up every node of a plan at each execution, those a null parameter leaves
-- idle too, and setting up the claim took a sixth to a quarter of the
-- server's CPU for a checkpoint that claims nothing (docs/cost-model.md).
{query:checkpoint_landed}
SELECT * FROM landed
