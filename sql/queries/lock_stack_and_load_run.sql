-- Takes the stack lock of run $2 on this session, with the key of
-- stack_try_lock ($3: this session holds it already, so it is not taken
-- twice), and when it got it reads the run the slot is about to execute,
-- with the wait it resumes from, if a signal (or the inbox) claimed one: its
-- payload goes into the context. One round trip for what would be two. The
-- row is read in the statement's snapshot, which may predate the lock: a
-- change committed in between bumped the version, so the slot's first
-- checkpoint is fenced as any stale write is.
-- past_deadline: its deadline has passed (database time), so it must fail
-- rather than run another step.
WITH stack AS MATERIALIZED (
  SELECT CASE WHEN $3::boolean THEN true
              ELSE pg_try_advisory_lock(hashtextextended($1 || ':stack:' || $2, 0)) END AS locked)
SELECT stack.locked, run.*
FROM stack LEFT JOIN LATERAL (
  SELECT r.*, (r.deadline_at <= now()) IS TRUE AS past_deadline,
         w.correlation_key AS resume_key, w.event AS resume_event, w.payload AS resume_payload,
         w.claimant AS resume_claimant
  FROM {schema}.runs r
  LEFT JOIN LATERAL (
    SELECT * FROM {schema}.wait_records w
    WHERE w.run_id = r.id AND w.status = 'RESUMING'
    ORDER BY w.claimed_at LIMIT 1) w ON true
  WHERE r.id = $2::uuid) run ON stack.locked
