-- Runs whose worker stopped renewing (crashed, partitioned) become due
-- again. The attempt is not consumed; the version bump fences the old holder.
WITH expired AS MATERIALIZED (
  SELECT id FROM {schema}.runs
  WHERE status = 'running' AND lease_expires_at < now()
  ORDER BY lease_expires_at LIMIT $1
  FOR UPDATE SKIP LOCKED
), released AS (
  UPDATE {schema}.runs r
  SET status = {schema}.due_status(r.final_status), run_at = now(), lease_owner = NULL, lease_expires_at = NULL,
      version = r.version + 1, updated_at = now()
  FROM expired WHERE r.id = expired.id
  RETURNING r.id, r.cursor, r.attempt, r.queue
), events AS (
  INSERT INTO {schema}.run_events (run_id, step, attempt, kind)
  SELECT id, cursor, attempt, 'lease_expired' FROM released
)
SELECT id, queue FROM released
