-- The fleet's backlog, for the metrics: unfinished runs (and runs awaiting
-- an operator) per queue and state, where a ready run due later is
-- 'delayed', and each group's oldest due time as an age in seconds (null
-- when nothing in it is due). Finished runs, the bulk of the table, are not
-- counted: the two arms of the OR read runs_status_created_idx and
-- runs_running_idx (migration 20). One daemon of the fleet reads it per
-- interval.
SELECT queue,
       CASE WHEN status = 'ready' AND run_at > now() THEN 'delayed' ELSE status END AS state,
       count(*) AS runs,
       extract(epoch FROM now() - min(run_at) FILTER (
         WHERE status IN ('ready', 'compensating') AND run_at <= now()))::float8 AS oldest_due_age
FROM {schema}.runs
WHERE status IN ('ready', 'waiting', 'compensating', 'compensation_failed') OR status = 'running'
GROUP BY 1, 2
