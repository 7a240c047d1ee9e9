-- Schema 17: history with one index and without a foreign key to its run.
--
-- One index instead of two: the primary key becomes (run_id, position),
-- which is what every reader reads by (a run's history in order, retention
-- by run); the old key on position alone only cost every event an entry.
-- position stays unique by construction (an identity column, always
-- generated), and the table keeps a primary key for logical replication.
-- Builds the new index with a pass over run_events, which blocks writes to
-- it while it lasts.
CREATE UNIQUE INDEX IF NOT EXISTS run_events_run_position_key
  ON {schema}.run_events (run_id, position);
ALTER TABLE {schema}.run_events DROP CONSTRAINT IF EXISTS run_events_pkey;
ALTER TABLE {schema}.run_events
  ADD CONSTRAINT run_events_pkey PRIMARY KEY USING INDEX run_events_run_position_key;
DROP INDEX IF EXISTS {schema}.run_events_run_idx;

-- No foreign key to the run. The key made each
-- event's insert lock its run's row (FOR KEY SHARE), one more WAL record
-- per event on the hot path (some 15% of a step's WAL), for what the
-- writers guarantee already: every event is written by the statement or
-- transaction that reads or changes its run (save_checkpoint, the SQL API,
-- the sweeper), and the worker role may not delete runs.
-- What the key's ON DELETE CASCADE did, a trigger does: a statement that
-- deletes runs deletes their history with them.
ALTER TABLE {schema}.run_events DROP CONSTRAINT IF EXISTS run_events_run_id_fkey;

CREATE OR REPLACE FUNCTION {schema}.delete_history_of_deleted_runs() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM {schema}.run_events e USING deleted_runs d WHERE e.run_id = d.id;
  RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS runs_delete_history ON {schema}.runs;
CREATE TRIGGER runs_delete_history
  AFTER DELETE ON {schema}.runs
  REFERENCING OLD TABLE AS deleted_runs
  FOR EACH STATEMENT
  EXECUTE FUNCTION {schema}.delete_history_of_deleted_runs();
