-- The child runs a run started, oldest first, at most $2.
SELECT id::text AS id, workflow, status, created_at::text AS created_at
FROM {schema}.runs
WHERE parent_run_id = $1::uuid
ORDER BY created_at, id
LIMIT $2
