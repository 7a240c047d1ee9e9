-- Moves a schedule past the ticks just handled. $2 (epoch seconds) NULL parks
-- it until the next sync; $3 NULL keeps last_fire_at.
UPDATE {schema}.schedules
SET next_fire_at = to_timestamp($2::bigint),
    last_fire_at = coalesce(to_timestamp($3::bigint), last_fire_at),
    updated_at = now()
WHERE name = $1
