-- Starts one tick's run with the tick's key, in scope forever (a tick
-- happens once ever); a second call with the same key returns the existing
-- run and started = false. An unregistered workflow yields a NULL id
-- instead of an error, so the caller can skip the tick without aborting its
-- transaction.
-- The run is due at its tick time ($5, epoch seconds), so caught-up ticks are
-- claimed oldest first.
-- $1 workflow, $2 input, $3 key, $4 queue ('' = the workflow's), $5 tick.
WITH known AS MATERIALIZED (
  SELECT EXISTS (SELECT 1 FROM {schema}.workflow_definitions WHERE workflow = $1) AS ok
), outcome AS MATERIALIZED (
  SELECT CASE WHEN known.ok
              THEN {schema}.start_run_outcome($1, $2::jsonb, $3, nullif($4, ''), 0,
                                              to_timestamp($5::bigint), 'default',
                                              p_key_scope => 'forever')
         END AS o
  FROM known
)
SELECT (o).run_id::text AS run_id, coalesce((o).created, false) AS started
FROM outcome
