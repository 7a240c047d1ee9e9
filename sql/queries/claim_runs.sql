-- Claims up to $3 due runs of the worker's queues whose definition it has
-- loaded (ready ones, and failed or cancelled ones whose compensations are
-- due). Each queue is read on its own, in the order of runs_due_idx
-- (queue, priority DESC, run_at, id): with the queue fixed, the index order
-- is the claim's order, so a claim reads about as many index entries as it
-- claims however long the backlog is (queue = ANY(...) over all queues at
-- once would read and sort every ready run). Each queue locks at most its
-- quota, so a claim of k queues may lock up to k × $3 rows and claim the
-- first $3 of them; the rest are let go when it commits. The definition
-- check is a filter on the rows the index hands over, so it costs nothing
-- while they are of served definitions. MATERIALIZED keeps each LIMIT
-- honest (PostgreSQL bug #15715: a plain IN (subquery) can claim more than
-- asked). The version bump fences any earlier holder. The runs come back
-- in the claim's order, which is the order a batch takes them in: an
-- UPDATE's RETURNING has none of its own, and the plan decides it. The
-- chosen runs are updated through an array of their ids, which a generic
-- plan (session_setup.sql) reads by primary key: a join with `chosen`, of a
-- size it cannot know, was planned as a hash join over every run.
-- A queue with a row in queue_limits (migration 11) gets at most its room:
-- max_running less its running runs, and no more runs than its bucket has
-- tokens (each claimed run's first step spends one; step_tokens tells the
-- executor to take one for each further step). Its row stays locked until
-- the claim commits, so claims of one limited queue take turns, in queue
-- order. Queues without a row cost one probe of queue_limits' primary key.
-- The claim commits without waiting for its WAL to reach the disk
-- (synchronous_commit off, for this transaction only): one flush less per
-- run. Nothing in it needs to outlive a crash of the server. A claim that
-- such a crash takes back leaves its runs due, as they were, and takes the
-- sessions that could act on it down with it: a slot that reconnects reads
-- the run again and leaves it if its version moved. Every commit that must
-- last (a checkpoint, a signal) flushes the WAL up to itself, so a claim
-- that anything durable builds on is on disk first.
WITH no_flush AS MATERIALIZED (
  SELECT set_config('synchronous_commit', 'off', true)),
limited AS MATERIALIZED (
  SELECT * FROM {schema}.queue_limits WHERE queue = ANY($1::text[])
  ORDER BY queue
  FOR UPDATE),
room AS MATERIALIZED (
  SELECT queue, rate_per_second IS NOT NULL AS step_tokens,
         greatest(0, least(max_running - {schema}.queue_running(queue),
                           floor({schema}.queue_tokens(rate_per_second, burst, tokens, refilled_at)),
                           $3))::integer AS room
  FROM limited),
quota AS MATERIALIZED (
  SELECT q.queue, coalesce(room.room, $3) AS room
  FROM (SELECT DISTINCT unnest($1::text[]) AS queue) q CROSS JOIN no_flush
       LEFT JOIN room USING (queue)),
due AS MATERIALIZED (
  SELECT d.* FROM quota CROSS JOIN LATERAL (
    SELECT id, priority, run_at FROM {schema}.runs
    WHERE status IN ('ready', 'compensating') AND queue = quota.queue AND run_at <= now()
      AND definition_hash = ANY($2::text[])
    ORDER BY priority DESC, run_at, id
    LIMIT quota.room
    FOR UPDATE SKIP LOCKED) d),
chosen AS (
  SELECT id FROM due
  ORDER BY priority DESC, run_at, id
  LIMIT $3),
claimed AS (
  UPDATE {schema}.runs r
  SET status = 'running', lease_owner = $4, lease_expires_at = now() + $5 * interval '1 millisecond',
      version = r.version + 1, updated_at = now()
  WHERE r.id = ANY (ARRAY(SELECT id FROM chosen))
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
ORDER BY c.priority DESC, c.run_at, c.id
