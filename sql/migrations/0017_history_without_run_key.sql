-- Schema 17: history without a foreign key to its run. The key made each
-- event's insert lock its run's row (FOR KEY SHARE), one more WAL record
-- per event on the hot path (some 15% of a step's WAL), for what the
-- writers guarantee already: every event is written by the statement or
-- transaction that reads or changes its run (save_checkpoint, the SQL API,
-- the sweeper), and the worker role may not delete runs.
-- What the key's ON DELETE CASCADE did, a trigger does: a statement that
-- deletes runs deletes their history with them. Rewrites nothing.
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
