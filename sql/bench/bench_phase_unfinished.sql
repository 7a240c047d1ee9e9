-- The runs of a phase (tagged $1 in their input) not yet finished, per
-- status: what a phase polls while it runs. Each half reads the partial index
-- of its statuses (runs_status_created_idx, runs_running_idx), never the
-- finished runs: they are most of the table and grow with every phase, and a
-- poll that read them all five times a second would take from the daemons it
-- measures CPU that pgbench, their ceiling, keeps.
SELECT status, count(*) FROM {schema}.runs
WHERE status IN ('ready', 'waiting', 'compensating') AND input @> $1::jsonb
GROUP BY status
UNION ALL
SELECT status, count(*) FROM {schema}.runs
WHERE status = 'running' AND input @> $1::jsonb
GROUP BY status
