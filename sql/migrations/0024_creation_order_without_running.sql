-- Schema 24: the creation-order indexes leave out running runs.
--
-- A claim (ready to running) cannot be a HOT update: the status moves, so
-- the new version of the run gets an entry in every index whose condition
-- it meets, about 80 bytes of WAL apiece. Three of those were the indexes
-- that list runs in creation order (all runs, by workflow and status, by
-- queue), each taking an entry at the claim that the run's end replaces
-- again a few steps later. Running runs are few (as many as the fleet's
-- slots hold) and runs_running_idx finds them already: the lists read them
-- through it and merge them with the rest (list_runs.sql,
-- console_runs.sql). Without them a claim writes two index entries (the
-- primary key and runs_running_idx) instead of five.
-- Builds the three new indexes with passes over runs, which block writes
-- to it while they last (a few seconds per million runs each); the old
-- ones are dropped and the new ones take their names at the end, which
-- blocks reads of runs too, from then until the migration commits:
-- migrate in a quiet moment.
CREATE INDEX runs_created_idx_24 ON {schema}.runs (created_at, id)
  WHERE status <> 'running';
CREATE INDEX runs_list_idx_24 ON {schema}.runs (workflow, status, created_at, id)
  WHERE status <> 'running';
CREATE INDEX runs_queue_created_idx_24 ON {schema}.runs (queue, created_at, id)
  WHERE status <> 'running';
DROP INDEX IF EXISTS {schema}.runs_created_idx;
DROP INDEX IF EXISTS {schema}.runs_list_idx;
DROP INDEX IF EXISTS {schema}.runs_queue_created_idx;
ALTER INDEX {schema}.runs_created_idx_24 RENAME TO runs_created_idx;
ALTER INDEX {schema}.runs_list_idx_24 RENAME TO runs_list_idx;
ALTER INDEX {schema}.runs_queue_created_idx_24 RENAME TO runs_queue_created_idx;
