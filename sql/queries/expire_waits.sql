-- Expires up to $1 waits whose timeout passed, by database time. SKIP LOCKED
-- keeps several workers from expiring one wait twice. A wait with a timeout
-- step continues the run there; one without fails the run with code
-- 'wait_timeout' (a 'failed' event, as a step that fails for good writes),
-- and the run unwinds first when steps with a compensation committed.
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
  RETURNING r.id, r.queue, r.status, r.cursor, r.attempt, r.error, r.compensations,
            e.event, e.correlation_key, e.timeout_step
), events AS (
  -- One row per event, inserted in the order the history reads them.
  INSERT INTO {schema}.run_events (run_id, step, attempt, kind, value)
  SELECT x.id, x.cursor, x.attempt, x.kind, x.value FROM (
    SELECT id, cursor, 0 AS attempt, 1 AS ordinal, 'wait_expired' AS kind,
           jsonb_build_object('event', event, 'key', correlation_key, 'then', status) AS value
    FROM moved
    UNION ALL
    SELECT id, cursor, attempt, 2, 'failed',
           jsonb_build_object('code', 'wait_timeout', 'error', error)
    FROM moved WHERE timeout_step IS NULL
    UNION ALL
    SELECT id, cursor, attempt, 3, 'compensating',
           jsonb_build_object('compensations', jsonb_array_length(compensations))
    FROM moved WHERE timeout_step IS NULL AND status = 'compensating') x
  ORDER BY x.id, x.ordinal
)
SELECT id, status,
       CASE WHEN status IN ('ready', 'compensating') THEN {schema}.wake(queue) END
FROM moved
