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
-- in one round, 0.46 to 0.49 ms for the claim of migration 23 and 0.41
-- to 0.43 for a copy of it without the limits; in another, 0.45 to 0.47
-- for the claim of migration 23 and 0.42 to 0.45 for this one, which
-- reads them first. A daemon draining noop3 ran 4.8 to 6.9% faster at
-- one slot and 2.5 to 4.6% at 8 slots (three pairs each).
-- Now a first statement reads the limit rows of the claim's queues (locked
-- in queue order when the claim serves limited queues, as before), the
-- claim's query takes their rooms as arrays, and the token update runs
-- after the claim, only for the rated queues it claimed from. What is
-- claimed, and when, is unchanged. Replaces one function; rewrites
-- nothing.

-- Claims as the version of migration 23 does, whose comment says how: up
-- to p_want due runs of queues p_queues whose definition (p_hashes) the
-- worker has loaded, for worker p_worker with a lease of p_lease_ms, each
-- queue read on its own in the order of runs_due_idx, p_except never
-- claimed, and with p_lock_stacks each run's stack lock taken and the wait
-- it resumes from read in a statement of its own. What changed is where
-- the queue limits (migration 11) are read and spent. A queue with a row
-- in queue_limits gets at most its room: max_running less its running
-- runs, and no more runs than its bucket has tokens (each claimed run's
-- first step spends one; step_tokens tells the executor to take one for
-- each further step). With p_limited_queues its row stays locked until the
-- claim commits, so claims of one limited queue take turns, in queue
-- order. Without it, queues with a row are left to other claims and their
-- rows are read without a lock: a checkpoint's claim would hold them
-- locked through the checkpoint's flush, and every claim of the fleet that
-- reads them would wait for it.
CREATE OR REPLACE FUNCTION {schema}.claim_runs(
  p_queues text[], p_hashes text[], p_want integer, p_worker text, p_lease_ms bigint,
  p_lock_stacks boolean DEFAULT false, p_except uuid DEFAULT NULL,
  p_limited_queues boolean DEFAULT true)
RETURNS TABLE (run {schema}.runs, step_tokens boolean, locked boolean, past_deadline boolean,
               resume_key text, resume_event text, resume_payload jsonb, resume_claimant text,
               claim_order integer)
LANGUAGE plpgsql
-- The due runs are read in the order of runs_due_idx, whatever the
-- statistics: planned once for every call (a generic plan), the claim
-- cannot know how many runs it will ask for, and the planner assumes a
-- tenth of the due ones. When most of the table is ready and the index
-- has grown with the runs gone through it, reading every run and sorting
-- them looked cheaper, and every claim read the whole backlog (12 000
-- runs: 5 to 10 ms a claim). The claim's other sorts, of the few runs it
-- took, have no other way and are kept.
SET enable_sort = off
AS $$
#variable_conflict use_column
DECLARE
  taken_run {schema}.runs;
  -- The claim's queues that have a row in queue_limits (null for none),
  -- the room of each, and whether its runs spend rate tokens.
  queues_with_limits text[];
  rooms integer[];
  rated boolean[];
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
    INTO queues_with_limits, rooms, rated
    FROM (SELECT * FROM {schema}.queue_limits WHERE queue = ANY(p_queues)
          ORDER BY queue
          FOR UPDATE) l;
  ELSE
    -- A room of 0: this claim leaves limited queues to the claims that
    -- serve them (their rows are not locked here).
    SELECT array_agg(l.queue), array_agg(0), array_agg(false)
    INTO queues_with_limits, rooms, rated
    FROM {schema}.queue_limits l WHERE l.queue = ANY(p_queues);
  END IF;

  -- A query with a data-modifying WITH runs to its end before the loop's
  -- first turn: every run is claimed before any stack lock is tried. The
  -- token update comes after the loop, so a failure there leaves stack
  -- locks taken but uncounted, as any failure after the claim may: the
  -- callers let go of those (sql/queries/stack_release_uncounted.sql).
  FOR taken_run IN
    WITH quota AS MATERIALIZED (
      SELECT q.queue, coalesce(l.room, p_want) AS room
      FROM (SELECT DISTINCT unnest(p_queues) AS queue) q
           LEFT JOIN unnest(queues_with_limits, rooms) AS l(queue, room) USING (queue)
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
    step_tokens := coalesce(rated[array_position(queues_with_limits, run.queue)], false);
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
