-- Locks a run's row, as its own statement: a statement that starts after the
-- lock is granted sees everything the previous holder committed (under READ
-- COMMITTED one statement keeps the snapshot it started with, so a CTE that
-- waits for the lock would still miss rows the holder inserted, such as the
-- wait record of the checkpoint it was queued behind).
SELECT id FROM {schema}.runs WHERE id = $1::uuid FOR UPDATE
