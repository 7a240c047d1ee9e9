-- Takes one token of queue $1's bucket for the next step of a run the
-- worker holds: 0 when taken, else the milliseconds until the bucket next
-- holds one (database time). No row (the queue has no rate, or its limit was
-- lifted): nothing to take, the step may run.
WITH taken AS (
  UPDATE {schema}.queue_limits l
  SET (tokens, refilled_at) = (
    SELECT s.tokens, s.refilled_at
    FROM {schema}.queue_spend(l.rate_per_second, l.burst, l.tokens, l.refilled_at, 1) s)
  WHERE l.queue = $1 AND l.rate_per_second IS NOT NULL
    AND {schema}.queue_tokens(l.rate_per_second, l.burst, l.tokens, l.refilled_at) >= 1
  RETURNING l.queue)
SELECT CASE WHEN EXISTS (SELECT 1 FROM taken) THEN 0
            ELSE greatest(1, ceil((1 - {schema}.queue_tokens(rate_per_second, burst, tokens,
                                                              refilled_at)) / rate_per_second * 1000))
       END::bigint AS wait_ms
FROM {schema}.queue_limits
WHERE queue = $1 AND rate_per_second IS NOT NULL
