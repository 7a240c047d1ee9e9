-- One bounded batch of finished runs older than $1 hours, with their
-- history and waits. SKIP LOCKED keeps concurrent cleaners apart. A run
-- whose compensation failed still owes its other compensations: it stays
-- until an operator retries it.
WITH doomed AS (
  SELECT id FROM {schema}.runs
  WHERE finished_at < now() - $1 * interval '1 hour' AND status <> 'compensation_failed'
  ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED
), events AS (
  DELETE FROM {schema}.run_events e USING doomed d WHERE e.run_id = d.id RETURNING 1
), waits AS (
  DELETE FROM {schema}.wait_records w USING doomed d WHERE w.run_id = d.id RETURNING 1
), runs AS (
  DELETE FROM {schema}.runs r USING doomed d WHERE r.id = d.id RETURNING 1
)
SELECT (SELECT count(*) FROM runs) AS runs, (SELECT count(*) FROM events) AS events,
       (SELECT count(*) FROM waits) AS waits
