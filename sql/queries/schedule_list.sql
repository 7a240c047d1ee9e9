-- Every schedule with its fire times in UTC ISO form.
SELECT name, workflow, cron, timezone, queue, input::text AS input, missed_policy,
       catch_up_limit, enabled,
       to_char(next_fire_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS next_fire_at,
       to_char(last_fire_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS last_fire_at
FROM {schema}.schedules
ORDER BY name
