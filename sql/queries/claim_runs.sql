-- The poller's claim, and a slot's between runs: up to $3 due runs of
-- queues $1 of definitions $2 for worker $4, leased for $5 ms, in the
-- claim's order ({schema}.claim_runs: migration 23 says how it chooses,
-- migration 29 how it reads queue limits).
-- $6: a slot claiming for itself takes each run's stack lock on its session
-- and reads the run as it executes it (locked, past_deadline, resume_*).
-- The claim commits without waiting for its WAL to reach the disk
-- (synchronous_commit off, for this transaction only): one flush less per
-- run. Nothing in it needs to outlive a crash of the server. A claim that
-- such a crash takes back leaves its runs due, as they were, and takes the
-- sessions that could act on it down with it: the slot that claimed for
-- itself loses its session, and with it the run; one that reconnects for a
-- run the poller claimed reads it again and leaves it if its version
-- moved. Every commit that must
-- last (a checkpoint, a signal) flushes the WAL up to itself, so a claim
-- that anything durable builds on is on disk first.
WITH no_flush AS MATERIALIZED (
  SELECT set_config('synchronous_commit', 'off', true))
SELECT (c.run).*, c.step_tokens, c.locked, c.past_deadline,
       c.resume_key, c.resume_event, c.resume_payload, c.resume_claimant
FROM no_flush CROSS JOIN LATERAL {schema}.claim_runs($1::text[], $2::text[], $3, $4, $5, $6) c
ORDER BY c.claim_order
