-- Schema 29: the claim reads queue limits in a statement of its own, and
-- spends rate tokens only when it claimed a run of a rated queue.
--
-- The claim of migration 23 carried the queue limits inside its one query:
-- a locking read of queue_limits, the rooms, a probe per queue, and an
-- update of queue_limits that the server set up at every claim, whether or
-- not any queue had a limit. Almost no claim needs them: a checkpoint's
-- claim leaves limited queues to other claims, and most queues have no
-- limit. Measured on one database, alternating, pgbench of one session
-- claiming one run (stack lock and resume read included) and rolling back:
-- 0.46 to 0.49 ms with the limits in the query, 0.41 to 0.43 without them,
-- and 0.42 to 0.45 (against 0.45 to 0.47) for this function, which reads
-- them first; a daemon draining noop3 ran 4.8 to 6.9% faster at one slot
-- and 2.5 to 4.6% at 8 slots (three pairs each).
-- Now a first statement reads the limit rows of the claim's queues (locked
-- in queue order when the claim serves limited queues, as before), the
-- claim's query takes their rooms as arrays, and the token update runs
-- after the claim, only for the rated queues it claimed from. What is
-- claimed, and when, is unchanged. Replaces one function; rewrites
-- nothing.

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
-- order. Without p_limited_queues, queues with a row in queue_limits are
-- left to other claims (a room of 0), and their rows are read without a
-- lock: a checkpoint's claim would hold those rows locked through the
-- checkpoint's flush, and every claim of the fleet that reads them would
-- wait for it, whatever queue it claims from.
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
  taken_run {schema}.runs;
  -- The claim's queues that have a row in queue_limits (null for none),
  -- the room of each, and whether its runs spend rate tokens.
  limited_queues text[];
  limited_rooms integer[];
  limited_rated boolean[];
  -- The queue of each claimed run that spends a token.
  spending text[] := '{}';
BEGIN
  IF p_limited_queues THEN
    SELECT array_agg(l.queue ORDER BY l.queue),
           array_agg(greatest(0, least(l.max_running - {schema}.queue_running(l.queue),
                                       floor({schema}.queue_tokens(l.rate_per_second, l.burst,
                                                                   l.tokens, l.refilled_at)),
                                       p_want))::integer ORDER BY l.queue),
           array_agg(l.rate_per_second IS NOT NULL ORDER BY l.queue)
    INTO limited_queues, limited_rooms, limited_rated
    FROM (SELECT * FROM {schema}.queue_limits WHERE queue = ANY(p_queues)
          ORDER BY queue
          FOR UPDATE) l;
  ELSE
    SELECT array_agg(l.queue), array_agg(0), array_agg(false)
    INTO limited_queues, limited_rooms, limited_rated
    FROM {schema}.queue_limits l WHERE l.queue = ANY(p_queues);
  END IF;

  -- A query with a data-modifying WITH runs to its end before the loop's
  -- first turn: every run is claimed before any stack lock is tried.
  FOR taken_run IN
    WITH quota AS MATERIALIZED (
      SELECT q.queue, coalesce(l.room, p_want) AS room
      FROM (SELECT DISTINCT unnest(p_queues) AS queue) q
           LEFT JOIN unnest(limited_queues, limited_rooms) AS l(queue, room) USING (queue)
      WHERE coalesce(l.room, p_want) > 0),
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
      RETURNING r.*)
    SELECT * FROM taken t
    ORDER BY t.priority DESC, t.run_at, t.id
  LOOP
    run := taken_run;
    step_tokens := coalesce(limited_rated[array_position(limited_queues, run.queue)], false);
    IF step_tokens THEN
      spending := spending || run.queue;
    END IF;
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

  -- Each claimed run of a rated queue spends a token of its bucket, in the
  -- claim's transaction, on the row the first statement locked.
  IF cardinality(spending) > 0 THEN
    UPDATE {schema}.queue_limits l
    SET (tokens, refilled_at) = (
      SELECT s.tokens, s.refilled_at
      FROM {schema}.queue_spend(l.rate_per_second, l.burst, l.tokens, l.refilled_at, c.runs) s)
    FROM (SELECT q.queue, count(*) AS runs FROM unnest(spending) AS q(queue) GROUP BY 1) c
    WHERE l.queue = c.queue AND l.rate_per_second IS NOT NULL;
  END IF;
END $$;
