-- Claims up to $3 due runs of the worker's queues whose definition it has
-- loaded (ready ones, and failed or cancelled ones whose compensations are
-- due). MATERIALIZED keeps the LIMIT honest (a plain IN (subquery) can
-- claim more than asked). The version bump fences any earlier holder.
-- A queue with a row in queue_limits (migration 11) gets at most its room:
-- max_running less its running runs, and no more runs than its bucket has
-- tokens (each claimed run's first step spends one; step_tokens tells the
-- executor to take one for each further step). Its row stays locked until
-- the claim commits, so claims of one limited queue take turns, in queue
-- order. Queues without a row cost one probe of queue_limits' primary key.
WITH limited AS MATERIALIZED (
  SELECT * FROM {schema}.queue_limits WHERE queue = ANY($1::text[])
  ORDER BY queue
  FOR UPDATE),
room AS MATERIALIZED (
  SELECT queue, rate_per_second IS NOT NULL AS step_tokens,
         greatest(0, least(max_running - {schema}.queue_running(queue),
                           floor({schema}.queue_tokens(rate_per_second, burst, tokens, refilled_at)),
                           $3))::integer AS room
  FROM limited),
due AS MATERIALIZED (
  SELECT id, priority, run_at FROM {schema}.runs
  WHERE status IN ('ready', 'compensating') AND queue = ANY($1::text[]) AND run_at <= now()
    AND definition_hash = ANY($2::text[]) AND queue NOT IN (SELECT queue FROM room)
  ORDER BY priority DESC, run_at, id
  LIMIT $3
  FOR UPDATE SKIP LOCKED),
due_limited AS MATERIALIZED (
  SELECT d.* FROM room CROSS JOIN LATERAL (
    SELECT id, priority, run_at FROM {schema}.runs
    WHERE status IN ('ready', 'compensating') AND queue = room.queue AND run_at <= now()
      AND definition_hash = ANY($2::text[])
    ORDER BY priority DESC, run_at, id
    LIMIT room.room
    FOR UPDATE SKIP LOCKED) d),
chosen AS (
  SELECT id FROM (SELECT * FROM due UNION ALL SELECT * FROM due_limited) c
  ORDER BY priority DESC, run_at, id
  LIMIT $3),
claimed AS (
  UPDATE {schema}.runs r
  SET status = 'running', lease_owner = $4, lease_expires_at = now() + $5 * interval '1 millisecond',
      version = r.version + 1, updated_at = now()
  FROM chosen WHERE r.id = chosen.id
  RETURNING r.*),
spent AS (
  UPDATE {schema}.queue_limits l
  SET (tokens, refilled_at) = (
    SELECT s.tokens, s.refilled_at
    FROM {schema}.queue_spend(l.rate_per_second, l.burst, l.tokens, l.refilled_at, c.runs) s)
  FROM (SELECT queue, count(*) AS runs FROM claimed GROUP BY queue) c
  WHERE l.queue = c.queue AND l.rate_per_second IS NOT NULL)
SELECT c.*, coalesce(room.step_tokens, false) AS step_tokens
FROM claimed c LEFT JOIN room USING (queue)
