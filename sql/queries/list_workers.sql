-- Every worker the fleet has had, live ones first: its state by database
-- time ('live' when its heartbeat is younger than $1 ms, 'dead' when it
-- stopped heartbeating without stopping, 'stopped'), and the runs it holds.
SELECT w.id, w.hostname, w.pid, w.version, to_jsonb(w.queues) AS queues, w.concurrency,
       w.started_at, w.heartbeat_at, w.stopped_at,
       CASE WHEN w.stopped_at IS NOT NULL THEN 'stopped'
            WHEN w.heartbeat_at > now() - $1 * interval '1 millisecond' THEN 'live'
            ELSE 'dead' END AS state,
       (extract(epoch FROM now() - w.heartbeat_at) * 1000)::bigint AS heartbeat_age_ms,
       coalesce((SELECT jsonb_agg(jsonb_build_object('id', r.id, 'workflow', r.workflow,
                                                     'step', r.cursor) ORDER BY r.updated_at)
                 FROM {schema}.runs r
                 WHERE r.status = 'running' AND r.lease_owner = w.id), '[]'::jsonb) AS running
FROM {schema}.workers w
ORDER BY w.stopped_at IS NOT NULL, w.heartbeat_at DESC, w.id
LIMIT $2
