-- Starts a run, or finds the one that holds its key: the run id, and
-- whether this call created it.
SELECT s.run_id, s.created
FROM {schema}.start_run_outcome($1, $2::jsonb, $3, $4, $5, $6::timestamptz, $7, $8,
                                $9::bigint * interval '1 millisecond', $10) s
