-- Cancels a run and its live waits in one statement. A finished run is
-- returned unchanged (cancelled_version is null).
WITH target AS (
  SELECT id, status, version FROM {schema}.runs WHERE id = $1::uuid FOR UPDATE
), cancelled AS (
  UPDATE {schema}.runs r SET status = 'cancelled', cancel_reason = $2, lease_owner = NULL,
         lease_expires_at = NULL, version = r.version + 1, updated_at = now(), finished_at = now()
  FROM target t
  WHERE r.id = t.id
    AND t.status NOT IN ('completed', 'failed', 'cancelled', 'compensation_failed')
  RETURNING r.version
), waits AS (
  UPDATE {schema}.wait_records w SET status = 'CANCELLED', finished_at = now()
  WHERE w.run_id = $1::uuid AND w.status IN ('WAITING', 'RESUMING')
    AND EXISTS (SELECT 1 FROM cancelled)
  RETURNING 1
)
SELECT t.status AS previous_status, t.version AS previous_version,
       (SELECT version FROM cancelled) AS cancelled_version,
       (SELECT count(*) FROM waits) AS waits_cancelled
FROM target t
