-- Sets queue $1's limits. A new bucket starts full; a changed one keeps the
-- tokens it holds, at most the new burst. Unchanged limits write nothing.
-- Returns the row as it was (null columns for a new row) when it changed.
WITH before AS (
  SELECT max_running, rate_per_second, burst FROM {schema}.queue_limits WHERE queue = $1)
INSERT INTO {schema}.queue_limits AS l (queue, max_running, rate_per_second, burst, tokens)
VALUES ($1, $2, $3, $4, coalesce($4, 0))
ON CONFLICT (queue) DO UPDATE
SET max_running = excluded.max_running, rate_per_second = excluded.rate_per_second,
    burst = excluded.burst,
    tokens = coalesce(least({schema}.queue_tokens(l.rate_per_second, l.burst, l.tokens,
                                                  l.refilled_at), excluded.burst),
                      excluded.tokens),
    refilled_at = now(), updated_at = now()
WHERE (l.max_running, l.rate_per_second, l.burst)
      IS DISTINCT FROM (excluded.max_running, excluded.rate_per_second, excluded.burst)
RETURNING (SELECT max_running FROM before) AS old_max_running,
          (SELECT rate_per_second FROM before) AS old_rate_per_second,
          (SELECT burst FROM before) AS old_burst,
          (SELECT count(*) FROM before) = 1 AS existed
