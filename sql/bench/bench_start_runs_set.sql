-- Bulk starts through the set-based SQL API: $4 runs of workflow $1 with
-- input $2 in queue $3, by one start_runs call in the caller's one
-- transaction. Returns how many started.
SELECT count(*)
FROM {schema}.start_runs($1, (SELECT jsonb_agg($2::jsonb) FROM generate_series(1, $4::integer)),
                         NULL, $3)
