-- The ceiling of bulk starts: $4 runs of workflow $1 with input $2 in queue
-- $3, inserted straight into runs by one plain INSERT, as start_runs
-- inserts a call's runs without keys (the latest definition, its first
-- step, due now, the same ids) but without the SQL API's checks and
-- options. Returns nothing: the caller counts the rows.
INSERT INTO {schema}.runs (id, workflow, definition_version, definition_hash, queue, input,
                           context, cursor, run_at)
SELECT {schema}.time_ordered_uuid(), d.workflow, d.version, d.hash, $3, $2::jsonb, '{}'::jsonb,
       d.first_step, now()
FROM (SELECT w.workflow, w.version, w.hash, w.first_step
      FROM {schema}.workflow_definitions w WHERE w.workflow = $1
      ORDER BY w.version DESC, w.registered_at DESC LIMIT 1) d,
     generate_series(1, $4::integer)
