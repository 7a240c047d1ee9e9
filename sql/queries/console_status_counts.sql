-- How many runs each status has, counted up to $1 each: every count reads at
-- most $1 entries of runs_status_created_idx (migration 0014), so the runs
-- page costs the same with a million runs as with a hundred. A count of $1
-- means "at least $1".
SELECT s.status,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.runs r WHERE r.status = s.status LIMIT $1) c)
         AS runs
FROM unnest(ARRAY['ready', 'running', 'waiting', 'completed', 'failed', 'cancelled',
                  'compensating', 'compensation_failed']) AS s(status)
