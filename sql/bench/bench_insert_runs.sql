-- The ceiling of bulk starts: $4 runs of workflow $1 with input $2 in queue
-- $3, inserted straight into runs by one plain INSERT, as start_runs
-- inserts a call's runs without keys (its start_options, the same ids) but
-- without the checks of the inputs. Returns nothing: the caller counts the
-- rows.
INSERT INTO {schema}.runs (id, workflow, definition_version, definition_hash, key_scope, queue,
                           input, context, cursor, run_at, deadline_at)
SELECT {schema}.time_ordered_uuid(), $1, (o.definition).version, (o.definition).hash,
       o.key_scope, o.queue, $2::jsonb, '{}'::jsonb, (o.definition).first_step, now(),
       o.deadline_at
FROM {schema}.start_options($1, $3, NULL, NULL, NULL, NULL) o, generate_series(1, $4::integer)
