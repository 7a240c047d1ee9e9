-- Schema 23: the claim is a function, so that a slot's parking checkpoint
-- can claim the slot's next run in its own statement.
--
-- A run claimed by the poller costs a transaction of its own (the claim)
-- and a read-only one on the slot's session (its stack lock and read)
-- before its first step: at one slot, five transactions for the three steps
-- of noop3. A slot whose run parks under a backlog now claims its next run
-- in the statement of that checkpoint (save_checkpoint.sql), takes its
-- stack lock there and reads it: its steps' commits are then all it costs.
-- Both claims, the poller's and the checkpoint's, are this function.
-- Creates two functions; rewrites nothing.

-- The wait a run resumes from, when a signal (or the inbox) claimed one.
-- A set-returning SQL function without attributes, so that a caller's plan
-- takes its query in (inlined) instead of calling it.
CREATE OR REPLACE FUNCTION {schema}.resumed_wait(p_run_id uuid)
RETURNS SETOF {schema}.wait_records LANGUAGE sql STABLE AS $$
  SELECT * FROM {schema}.wait_records w
  WHERE w.run_id = p_run_id AND w.status = 'RESUMING'
  ORDER BY w.claimed_at LIMIT 1
$$;

-- Claims up to p_want due runs of queues p_queues whose definition
-- (p_hashes) the worker has loaded (ready ones, and failed or cancelled
-- ones whose compensations are due), for worker p_worker with a lease of
-- p_lease_ms. Each queue is read on its own, in the order of runs_due_idx
-- (queue, priority DESC, run_at, id): with the queue fixed, the index order
-- is the claim's order, so a claim reads about as many index entries as it
-- claims however long the backlog is (queue = ANY(...) over all queues at
-- once would read and sort every ready run). Each queue locks at most its
-- quota, so a claim of k queues may lock up to k × p_want rows and claim
-- the first p_want of them; the rest are let go when it commits. The
-- definition check is a filter on the rows the index hands over, so it
-- costs nothing while they are of served definitions. MATERIALIZED keeps
-- each LIMIT honest (PostgreSQL bug #15715: a plain IN (subquery) can claim
-- more than asked). The version bump fences any earlier holder. The chosen
-- runs are updated through an array of their ids, which a generic plan
-- reads by primary key: a join with `chosen`, of a size it cannot know, was
-- planned as a hash join over every run.
-- A queue with a row in queue_limits (migration 11) gets at most its room:
-- max_running less its running runs, and no more runs than its bucket has
-- tokens (each claimed run's first step spends one; step_tokens tells the
-- executor to take one for each further step). Its row stays locked until
-- the claim commits, so claims of one limited queue take turns, in queue
-- order. Queues without a row cost one probe of queue_limits' primary key.
-- Without p_limited_queues, queues with a row in queue_limits are left to
-- other claims: a checkpoint's claim would hold those rows locked through
-- the checkpoint's flush, and every claim of the fleet that reads them
-- would wait for it, whatever queue it claims from.
-- p_except is never claimed: the run whose checkpoint claims (this
-- transaction holds its row, so SKIP LOCKED would not pass it over).
-- With p_lock_stacks, each claimed run's stack lock is taken on this
-- session (the key of sql/queries/stack_try_lock.sql; `locked` says whether
-- it was free) and the wait it resumes from is read, as
-- sql/queries/lock_stack_and_load_run.sql reads it. That read is a
-- statement of its own: in READ COMMITTED it takes a fresh snapshot, later
-- than the claim's row locks, so it sees every change committed to these
-- runs before the claim took them (the claim's snapshot may predate a
-- signal whose update its row lock found and followed). plpgsql, not SQL: a SQL
-- function's plans last one call of its caller's statement, and this one
-- planned at every claim took 3 ms.
-- The runs come back in the claim's order (claim_order).
CREATE OR REPLACE FUNCTION {schema}.claim_runs(
  p_queues text[], p_hashes text[], p_want integer, p_worker text, p_lease_ms bigint,
  p_lock_stacks boolean DEFAULT false, p_except uuid DEFAULT NULL,
  p_limited_queues boolean DEFAULT true)
RETURNS TABLE (run {schema}.runs, step_tokens boolean, locked boolean, past_deadline boolean,
               resume_key text, resume_event text, resume_payload jsonb, resume_claimant text,
               claim_order integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  taken_run record;
BEGIN
  -- A query with a data-modifying WITH runs to its end before the loop's
  -- first turn: every run is claimed before any stack lock is tried.
  FOR taken_run IN
    WITH limited AS MATERIALIZED (
      SELECT * FROM {schema}.queue_limits WHERE queue = ANY(p_queues) AND p_limited_queues
      ORDER BY queue
      FOR UPDATE),
    room AS MATERIALIZED (
      SELECT l.queue, l.rate_per_second IS NOT NULL AS step_tokens,
             greatest(0, least(l.max_running - {schema}.queue_running(l.queue),
                               floor({schema}.queue_tokens(l.rate_per_second, l.burst, l.tokens,
                                                           l.refilled_at)),
                               p_want))::integer AS room
      FROM limited l),
    quota AS MATERIALIZED (
      SELECT q.queue, coalesce(room.room, p_want) AS room
      FROM (SELECT DISTINCT unnest(p_queues) AS queue) q
           LEFT JOIN room USING (queue)
      WHERE p_limited_queues
         OR NOT EXISTS (SELECT FROM {schema}.queue_limits l WHERE l.queue = q.queue)),
    due AS MATERIALIZED (
      SELECT d.* FROM quota CROSS JOIN LATERAL (
        SELECT r.id, r.priority, r.run_at FROM {schema}.runs r
        WHERE r.status IN ('ready', 'compensating') AND r.queue = quota.queue AND r.run_at <= now()
          AND r.definition_hash = ANY(p_hashes) AND r.id IS DISTINCT FROM p_except
        ORDER BY r.priority DESC, r.run_at, r.id
        LIMIT quota.room
        FOR UPDATE SKIP LOCKED) d),
    chosen AS (
      SELECT due.id FROM due
      ORDER BY due.priority DESC, due.run_at, due.id
      LIMIT p_want),
    taken AS (
      UPDATE {schema}.runs r
      SET status = 'running', lease_owner = p_worker,
          lease_expires_at = now() + p_lease_ms * interval '1 millisecond',
          version = r.version + 1, updated_at = now()
      WHERE r.id = ANY (ARRAY(SELECT chosen.id FROM chosen))
      RETURNING r AS run),
    spent AS (
      UPDATE {schema}.queue_limits l
      SET (tokens, refilled_at) = (
        SELECT s.tokens, s.refilled_at
        FROM {schema}.queue_spend(l.rate_per_second, l.burst, l.tokens, l.refilled_at, c.runs) s)
      FROM (SELECT (t.run).queue AS queue, count(*) AS runs FROM taken t GROUP BY 1) c
      WHERE l.queue = c.queue AND l.rate_per_second IS NOT NULL)
    SELECT t.run AS claimed, coalesce(room.step_tokens, false) AS tokens
    FROM taken t LEFT JOIN room ON room.queue = (t.run).queue
    ORDER BY (t.run).priority DESC, (t.run).run_at, (t.run).id
  LOOP
    run := taken_run.claimed;
    step_tokens := taken_run.tokens;
    claim_order := coalesce(claim_order, 0) + 1;
    past_deadline := (run.deadline_at <= now()) IS TRUE;
    locked := CASE WHEN p_lock_stacks
                   THEN pg_try_advisory_lock(
                          hashtextextended('{schema_name}:stack:' || run.id::text, 0))
              END;
    resume_key := NULL;
    resume_event := NULL;
    resume_payload := NULL;
    resume_claimant := NULL;
    IF locked THEN
      SELECT w.correlation_key, w.event, w.payload, w.claimant
      INTO resume_key, resume_event, resume_payload, resume_claimant
      FROM {schema}.resumed_wait(run.id) w;
    END IF;
    RETURN NEXT;
  END LOOP;
END $$;
