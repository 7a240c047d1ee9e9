-- How many runs each status has, counted up to $1 each. Each count names
-- its status, so that the planner reads the index that holds that status
-- (migration 20): runs_status_created_idx, runs_running_idx for running
-- runs and runs_finished_idx for completed ones. A count reads at most $1
-- entries, so the runs page costs the same with a million runs as with a
-- hundred; a status given as a parameter planned a sequential scan. A count
-- of $1 means "at least $1".
SELECT 'ready' AS status,
       (SELECT count(*) FROM (SELECT FROM {schema}.runs WHERE status = 'ready' LIMIT $1) c) AS runs
UNION ALL
SELECT 'running',
       (SELECT count(*) FROM (SELECT FROM {schema}.runs WHERE status = 'running' LIMIT $1) c)
UNION ALL
SELECT 'waiting',
       (SELECT count(*) FROM (SELECT FROM {schema}.runs WHERE status = 'waiting' LIMIT $1) c)
UNION ALL
SELECT 'completed',
       (SELECT count(*) FROM (SELECT FROM {schema}.runs
                              WHERE status = 'completed' AND finished_at IS NOT NULL LIMIT $1) c)
UNION ALL
SELECT 'failed',
       (SELECT count(*) FROM (SELECT FROM {schema}.runs WHERE status = 'failed' LIMIT $1) c)
UNION ALL
SELECT 'cancelled',
       (SELECT count(*) FROM (SELECT FROM {schema}.runs WHERE status = 'cancelled' LIMIT $1) c)
UNION ALL
SELECT 'compensating',
       (SELECT count(*) FROM (SELECT FROM {schema}.runs WHERE status = 'compensating' LIMIT $1) c)
UNION ALL
SELECT 'compensation_failed',
       (SELECT count(*) FROM (SELECT FROM {schema}.runs
                              WHERE status = 'compensation_failed' LIMIT $1) c)
