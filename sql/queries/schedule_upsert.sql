-- Inserts or updates a declared schedule. A row whose declaration did not
-- change is not written (many daemons sync the same list at start); a new,
-- re-enabled or re-timed (cron, timezone) schedule starts at $10 (epoch
-- seconds, the first fire time after now), so disabled periods are not caught
-- up. inserted tells a new row from an updated one; no row: unchanged.
INSERT INTO {schema}.schedules AS s
  (name, workflow, cron, timezone, queue, input, missed_policy, catch_up_limit, enabled,
   next_fire_at)
VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, to_timestamp($10::bigint))
ON CONFLICT (name) DO UPDATE
SET workflow = excluded.workflow, cron = excluded.cron, timezone = excluded.timezone,
    queue = excluded.queue, input = excluded.input, missed_policy = excluded.missed_policy,
    catch_up_limit = excluded.catch_up_limit, enabled = excluded.enabled,
    next_fire_at = CASE
      WHEN s.enabled AND s.next_fire_at IS NOT NULL AND s.cron = excluded.cron
           AND s.timezone = excluded.timezone THEN s.next_fire_at
      ELSE excluded.next_fire_at END,
    updated_at = now()
WHERE (s.workflow, s.cron, s.timezone, s.queue, s.input, s.missed_policy, s.catch_up_limit,
       s.enabled, s.next_fire_at IS NULL)
      IS DISTINCT FROM
      (excluded.workflow, excluded.cron, excluded.timezone, excluded.queue, excluded.input,
       excluded.missed_policy, excluded.catch_up_limit, excluded.enabled, false)
RETURNING (xmax = 0) AS inserted
