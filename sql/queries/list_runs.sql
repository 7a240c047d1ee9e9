-- Keyset pagination over (created_at, id); $7/$8 are the last row of the
-- previous page, $10 the queue. The caller asks for one row more than a page
-- to know whether another page follows. console_runs.sql is the same list
-- newest first.
-- Running runs are not in the creation-order indexes (migration 24): one
-- arm reads the other runs through them, the other reads running runs
-- through runs_running_idx, and the planner merges their ordered pages.
-- `listed` is not materialized: each arm takes its filters in, so that they
-- pick the arm's index. An arm that the status filter ($3) rules out has a
-- limit of 0, so that it is not read at all (its plan may be a poor one:
-- the planner sees that it finds nothing, not that it need not look).
WITH listed AS NOT MATERIALIZED (
  SELECT * FROM {schema}.runs
  WHERE ($1::text IS NULL OR namespace = $1)
    AND ($2::text IS NULL OR workflow = $2)
    AND ($3::text IS NULL OR status = $3)
    AND ($4::timestamptz IS NULL OR created_at >= $4::timestamptz)
    AND ($5::timestamptz IS NULL OR created_at < $5::timestamptz)
    AND ($6::text IS NULL OR starts_with(run_key, $6))
    AND ($10::text IS NULL OR queue = $10)
    AND ($7::timestamptz IS NULL OR (created_at, id) > ($7::timestamptz, $8::uuid))
)
(SELECT * FROM listed WHERE status <> 'running'
 ORDER BY created_at, id LIMIT CASE WHEN $3 = 'running' THEN 0 ELSE $9 END)
UNION ALL
(SELECT * FROM listed WHERE status = 'running'
 ORDER BY created_at, id LIMIT CASE WHEN $3 <> 'running' THEN 0 ELSE $9 END)
ORDER BY created_at, id
LIMIT $9
