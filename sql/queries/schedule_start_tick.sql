-- Starts one tick's run through start_run with the tick's key; a second call
-- with the same key returns the existing run. started says whether this call
-- created it (the snapshot of `prior` predates start_run's insert). An
-- unregistered workflow yields a NULL id instead of an error, so the caller
-- can skip the tick without aborting its transaction.
-- The run is due at its tick time ($5, epoch seconds), so caught-up ticks are
-- claimed oldest first.
-- $1 workflow, $2 input, $3 key, $4 queue ('' = the workflow's), $5 tick.
WITH prior AS MATERIALIZED (
  SELECT count(*) AS n FROM {schema}.runs
  WHERE namespace = 'default' AND workflow = $1 AND run_key = $3
), known AS MATERIALIZED (
  SELECT EXISTS (SELECT 1 FROM {schema}.workflow_definitions WHERE workflow = $1) AS ok
)
SELECT CASE WHEN known.ok
            THEN {schema}.start_run($1, $2::jsonb, $3, nullif($4, ''), 0,
                                     to_timestamp($5::bigint), 'default', NULL)::text
       END AS run_id,
       known.ok AND prior.n = 0 AS started
FROM prior, known
