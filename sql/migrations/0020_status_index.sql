-- Schema 20: the status index leaves out running and completed runs.
--
-- A claim (ready to running) and a run's last checkpoint (to completed)
-- cannot be HOT updates: the status moves. Each such version of a run gets
-- an entry in every index of the table, about 85 bytes of WAL apiece. The
-- console's status index (migration 14) took one at the claim and one at
-- the end of every run, for statuses that other indexes already find:
-- running runs through runs_running_idx (a few, as many as the fleet's
-- slots) and completed runs through runs_finished_idx, or in creation order
-- through runs_created_idx, of which they are the bulk. Without them a
-- run's claim and end write no entry here. The statuses an operator looks
-- for, and ready runs in creation order, keep their index.
-- Rebuilds the index with a pass over runs, which blocks writes to it while
-- it lasts (a few seconds per million runs): migrate in a quiet moment.
DROP INDEX IF EXISTS {schema}.runs_status_created_idx;
CREATE INDEX IF NOT EXISTS runs_status_created_idx ON {schema}.runs (status, created_at, id)
  WHERE status IN ('ready', 'waiting', 'failed', 'cancelled', 'compensating',
                   'compensation_failed');
