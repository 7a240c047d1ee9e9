-- The most overdue enabled schedule, locked for this transaction; rows another
-- worker holds are skipped, so each schedule is handled by one worker at a
-- time. $1: a JSON array of names to leave out; $2: optional timestamptz
-- standing in for now() (tests). Times come back as whole epoch seconds.
WITH clock AS (SELECT coalesce($2::timestamptz, now()) AS now)
SELECT s.name, s.workflow, s.cron, s.timezone, s.queue, s.input::text AS input,
       s.missed_policy, s.catch_up_limit, s.enabled,
       floor(extract(epoch FROM s.next_fire_at))::bigint AS next_fire_epoch,
       floor(extract(epoch FROM clock.now))::bigint AS now_epoch
FROM {schema}.schedules s, clock
WHERE s.enabled AND s.next_fire_at <= clock.now
  AND s.name <> ALL (SELECT jsonb_array_elements_text($1::jsonb))
ORDER BY s.next_fire_at, s.name
LIMIT 1
FOR UPDATE OF s SKIP LOCKED
