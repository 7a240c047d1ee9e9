-- Runs whose worker stopped renewing (crashed, partitioned) become due
-- again. The attempt is not consumed; the version bump fences the old holder.
-- A run whose lease expired $2 times in a row without a commit takes its
-- workers down: it fails with code 'crashed' (unwinding first when it owes
-- compensations; a compensation that keeps crashing ends the run in
-- compensation_failed), and its counter starts afresh for a retry.
-- Expiries are in no index (a renewal then would not be a HOT update): the
-- scan reads runs_running_idx, the running runs alone.
WITH expired AS MATERIALIZED (
  SELECT id FROM {schema}.runs
  WHERE status = 'running' AND lease_expires_at < now()
  ORDER BY lease_expires_at LIMIT $1
  FOR UPDATE SKIP LOCKED
), judged AS (
  SELECT r.id, r.lease_owner, r.lease_expiries + 1 AS expiries,
         r.lease_expiries + 1 >= $2 AS crashed,
         CASE WHEN r.lease_expiries + 1 < $2 THEN {schema}.due_status(r.final_status)
              WHEN r.final_status IS NOT NULL THEN 'compensation_failed'
              ELSE {schema}.ending_status('failed', r.compensations) END AS next_status
  FROM {schema}.runs r JOIN expired USING (id)
), released AS (
  UPDATE {schema}.runs r
  SET status = j.next_status,
      final_status = CASE WHEN j.crashed AND r.final_status IS NULL
                               AND j.next_status = 'compensating' THEN 'failed'
                          ELSE r.final_status END,
      attempt = CASE WHEN j.crashed AND j.next_status = 'compensating' THEN 0 ELSE r.attempt END,
      error = CASE WHEN j.crashed
                   THEN 'step ' || coalesce(r.cursor, '?') || ' crashed its worker: the lease expired '
                        || j.expiries || ' times in a row without a commit'
                   ELSE r.error END,
      lease_expiries = CASE WHEN j.crashed THEN 0 ELSE j.expiries END,
      finished_at = CASE WHEN j.next_status IN ('failed', 'compensation_failed') THEN now() END,
      run_at = now(), lease_owner = NULL, lease_expires_at = NULL,
      version = r.version + 1, updated_at = now()
  FROM judged j WHERE r.id = j.id
  RETURNING r.id, r.workflow, r.cursor, r.attempt, r.queue, r.status, r.error, r.compensations,
            j.lease_owner, j.expiries, j.crashed
), events AS (
  -- One row per event, inserted in the order the history reads them.
  INSERT INTO {schema}.run_events (run_id, step, attempt, kind, value)
  SELECT e.id, e.cursor, e.attempt, e.kind, e.value FROM (
    SELECT id, cursor, attempt, 1 AS ordinal, 'lease_expired' AS kind,
           jsonb_build_object('owner', lease_owner, 'expiries', expiries) AS value
    FROM released
    UNION ALL
    SELECT id, cursor, attempt, 2, CASE WHEN status = 'compensation_failed'
                                        THEN 'compensation_failed' ELSE 'failed' END,
           jsonb_build_object('code', 'crashed', 'error', error)
    FROM released WHERE crashed
    UNION ALL
    SELECT id, cursor, attempt, 3, 'compensating',
           jsonb_build_object('compensations', jsonb_array_length(compensations))
    FROM released WHERE crashed AND status = 'compensating') e
  ORDER BY e.id, e.ordinal
)
SELECT id, workflow, cursor, attempt, status, lease_owner, expiries, crashed,
       CASE WHEN status IN ('ready', 'compensating')
            THEN {schema}.wake(queue) END
FROM released
