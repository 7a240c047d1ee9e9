-- Takes the stack locks of runs $2 (an array) on this session, with the key
-- of stack_try_lock ($3, by position: this session holds that one already,
-- so it is not taken twice), and reads each run it got the lock of, with the
-- wait it resumes from ({schema}.resumed_wait), if a signal (or the inbox)
-- claimed one: its payload goes into the context. One round trip however
-- many runs: a slot takes the run the poller claimed for it, a batch slot
-- all of its batch. A row per input, in input order. The rows are read in
-- the statement's snapshot, which may predate a lock: a change committed in
-- between bumped the version, so the slot's first checkpoint is fenced as
-- any stale write is.
-- past_deadline: its deadline has passed (database time), so it must fail
-- rather than run another step.
WITH stack AS MATERIALIZED (
  SELECT i.run_id, i.position,
         CASE WHEN i.held THEN true
              ELSE pg_try_advisory_lock(hashtextextended($1 || ':stack:' || i.run_id, 0)) END
           AS locked
  FROM unnest($2::text[], $3::boolean[]) WITH ORDINALITY AS i(run_id, held, position))
SELECT stack.run_id AS locked_run_id, stack.locked, run.*
FROM stack LEFT JOIN LATERAL (
  SELECT r.*, (r.deadline_at <= now()) IS TRUE AS past_deadline,
         w.correlation_key AS resume_key, w.event AS resume_event, w.payload AS resume_payload,
         w.claimant AS resume_claimant
  FROM {schema}.runs r
  LEFT JOIN LATERAL {schema}.resumed_wait(r.id) w ON true
  WHERE r.id = stack.run_id::uuid) run ON stack.locked
ORDER BY stack.position
