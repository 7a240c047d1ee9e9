-- Schema 7: the fleet. Poison runs are counted, and workers say what they run.

-- Poison runs: a step that takes its worker down (abort, a null pointer, out
-- of memory) never commits, so its attempt was never counted and the next
-- worker to take the run over died the same way. lease_expiries counts the
-- leases of a run that expired in a row without a commit; any checkpoint
-- resets it, and the reaper fails the run with code 'crashed' once it
-- reaches the fleet's crash limit (reap_leases).
ALTER TABLE {schema}.runs
  ADD COLUMN lease_expiries integer NOT NULL DEFAULT 0,
  ADD CONSTRAINT runs_lease_expiries_check CHECK (lease_expiries >= 0);

-- The fleet view (`cairn workers`): what each worker runs and how many slots
-- it has, beside its host, pid, queues and heartbeat.
ALTER TABLE {schema}.workers
  ADD COLUMN version text NOT NULL DEFAULT '',
  ADD COLUMN concurrency integer NOT NULL DEFAULT 0;
