-- Bulk starts through the SQL API: $4 runs of workflow $1 with input $2 in
-- queue $3, in the caller's one transaction. Returns how many started.
SELECT count({schema}.start_run($1, $2::jsonb, NULL, $3))
FROM generate_series(1, $4::integer)
