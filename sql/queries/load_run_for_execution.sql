-- The run a slot is about to execute, with the wait it resumes from, if a
-- signal (or the inbox) claimed one: its payload goes into the context.
-- past_deadline: its deadline has passed (database time), so it must fail
-- rather than run another step.
SELECT r.*, (r.deadline_at <= now()) IS TRUE AS past_deadline,
       w.correlation_key AS resume_key, w.event AS resume_event, w.payload AS resume_payload,
       w.claimant AS resume_claimant
FROM {schema}.runs r
LEFT JOIN LATERAL (
  SELECT * FROM {schema}.wait_records w
  WHERE w.run_id = r.id AND w.status = 'RESUMING'
  ORDER BY w.claimed_at LIMIT 1) w ON true
WHERE r.id = $1::uuid
