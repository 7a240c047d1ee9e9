-- Every queue limit of the fleet, by queue, with the tokens its bucket holds
-- now (null without a rate) and its running runs.
SELECT queue, max_running, rate_per_second, burst,
       {schema}.queue_tokens(rate_per_second, burst, tokens, refilled_at) AS tokens,
       {schema}.queue_running(queue) AS running
FROM {schema}.queue_limits
ORDER BY queue
