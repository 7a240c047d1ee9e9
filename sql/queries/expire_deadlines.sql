-- Fails up to $1 runs whose deadline passed (database time) while no worker
-- held them: ready (due, sleeping or backing off) or waiting. Each fails
-- with code 'deadline_exceeded' as a step that fails for good does:
-- unwinding first when steps with a compensation committed (compensating,
-- due now), else failed and finished; its open waits are cancelled, so a
-- late signal finds them closed. A run a worker holds meets its deadline at
-- its next checkpoint (save_checkpoint). SKIP LOCKED keeps sweepers apart.
WITH due AS MATERIALIZED (
  SELECT r.id, r.attempt FROM {schema}.runs r
  WHERE r.deadline_at <= now() AND r.status IN ('ready', 'waiting')
  ORDER BY r.deadline_at LIMIT $1
  FOR UPDATE SKIP LOCKED
), failed AS (
  UPDATE {schema}.runs r SET
    status = {schema}.ending_status('failed', r.compensations),
    final_status = CASE WHEN {schema}.unwinds(r.compensations) THEN 'failed' END,
    attempt = CASE WHEN {schema}.unwinds(r.compensations) THEN 0 ELSE r.attempt END,
    error = {schema}.deadline_error(r.deadline_at),
    run_at = now(),
    finished_at = CASE WHEN NOT {schema}.unwinds(r.compensations) THEN now() END,
    version = r.version + 1, updated_at = now()
  FROM due WHERE r.id = due.id
  RETURNING r.id, r.workflow, r.cursor, due.attempt, r.queue, r.status, r.error, r.compensations,
            r.deadline_at
), closed_waits AS (
  UPDATE {schema}.wait_records w SET status = 'CANCELLED', finished_at = now()
  FROM failed f
  WHERE w.run_id = f.id AND w.status IN ('WAITING', 'RESUMING')
), events AS (
  SELECT {schema}.append_events(coalesce(jsonb_agg(x.e ORDER BY f.id, x.ordinality), '[]'::jsonb))
  FROM failed f,
       jsonb_array_elements({schema}.failure_events(f.id, f.cursor, f.attempt,
                                                    'deadline_exceeded', f.error,
                                                    f.compensations))
         WITH ORDINALITY AS x(e, ordinality)
)
SELECT f.id, f.workflow, f.cursor, f.attempt, f.status, f.error, f.deadline_at,
       CASE WHEN f.status = 'compensating' THEN {schema}.wake(f.queue) END
FROM failed f, events
