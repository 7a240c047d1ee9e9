-- Milliseconds until the next claimable run of these queues is due (null:
-- none), so an idle poller wakes for a retry or a sleep without polling.
-- greatest() skips a null: without the CASE, "none ready" came out as 0 ("due
-- now"), and an idle poller polled every millisecond. Queues with a limit
-- (queue_limits) are left out: their due runs may be held back by the limit,
-- and would wake the poller at once, again and again; the poller claims from
-- them every worker.poll_interval and when woken. Always planned for its
-- parameters (custom_plans_for_transaction.sql, before it).
SELECT CASE WHEN min(run_at) IS NOT NULL
            THEN greatest(0, extract(epoch FROM min(run_at) - now()) * 1000)::bigint END
FROM {schema}.runs
WHERE status IN ('ready', 'compensating') AND queue = ANY($1::text[]) AND definition_hash = ANY($2::text[])
  AND queue NOT IN (SELECT queue FROM {schema}.queue_limits)
