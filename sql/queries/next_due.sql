-- Milliseconds until the next claimable run of these queues is due (null:
-- none), so an idle poller wakes for a retry or a sleep without polling.
SELECT greatest(0, extract(epoch FROM min(run_at) - now()) * 1000)::bigint
FROM {schema}.runs
WHERE status IN ('ready', 'compensating') AND queue = ANY($1::text[]) AND definition_hash = ANY($2::text[])
