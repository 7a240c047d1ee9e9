-- A step's checkpoint (checkpoint_landed.sql) that claims the slot's next
-- run in the same statement and transaction, once the checkpoint has
-- landed: one due run of queues $17 without limits (queue_limits) and
-- definitions $18 for worker $19, leased for $20 ms, with its stack lock
-- taken on this session and its resume read ({schema}.claim_runs). Its
-- columns follow the checkpoint's (all null when none was due). Only for a
-- checkpoint that parks its run and is committed alone: the claim's commit
-- is then the checkpoint's, and the session's next run needs no
-- transaction of its own before its first step. Session locks outlive a
-- rollback, so a statement that fails after the claim may leave the next
-- run's stack lock taken but uncounted: the caller lets go of such locks
-- (stack_release_uncounted.sql).
{query:checkpoint_landed}
SELECT l.*, next.*
FROM landed l
LEFT JOIN LATERAL (
  SELECT (c.run).*, c.step_tokens, c.locked, c.past_deadline,
         c.resume_key, c.resume_event, c.resume_payload, c.resume_claimant
  FROM {schema}.claim_runs($17::text[], $18::text[], 1, $19::text, $20::bigint, true, $1::uuid,
                           false) c) next ON true
