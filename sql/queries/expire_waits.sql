-- Expires up to $1 waits whose timeout passed, by database time. SKIP LOCKED
-- keeps several workers from expiring one wait twice. A wait with a timeout
-- step continues the run there; one without fails the run, which unwinds
-- first when steps with a compensation committed.
WITH expired AS (
  UPDATE {schema}.wait_records w SET status = 'EXPIRED', finished_at = now()
  WHERE w.correlation_key IN (
    SELECT correlation_key FROM {schema}.wait_records
    WHERE status = 'WAITING' AND expires_at <= now()
    ORDER BY expires_at LIMIT $1
    FOR UPDATE SKIP LOCKED)
  RETURNING w.run_id, w.event, w.correlation_key, w.timeout_step
), moved AS (
  UPDATE {schema}.runs r SET
    status = CASE WHEN e.timeout_step IS NULL THEN {schema}.ending_status('failed', r.compensations)
                  ELSE 'ready' END,
    final_status = CASE WHEN e.timeout_step IS NULL AND {schema}.unwinds(r.compensations)
                        THEN 'failed' END,
    cursor = coalesce(e.timeout_step, r.cursor),
    run_at = now(),
    error = CASE WHEN e.timeout_step IS NULL
                 THEN 'wait for ' || e.event || ' (key ' || e.correlation_key || ') timed out'
                 ELSE r.error END,
    finished_at = CASE WHEN e.timeout_step IS NULL
                        AND NOT {schema}.unwinds(r.compensations) THEN now() END,
    version = r.version + 1, updated_at = now()
  FROM expired e
  WHERE r.id = e.run_id AND r.status = 'waiting'
  RETURNING r.id, r.queue, r.status, r.cursor, e.event, e.correlation_key
), events AS (
  INSERT INTO {schema}.run_events (run_id, step, kind, value)
  SELECT id, cursor, 'wait_expired',
         jsonb_build_object('event', event, 'key', correlation_key, 'then', status)
  FROM moved
)
SELECT id, status,
       CASE WHEN status IN ('ready', 'compensating') THEN pg_notify({schema}.wake_channel(), queue) END
FROM moved
