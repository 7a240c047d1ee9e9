-- cairn schema, version 2: the SQL API for starting runs, so an application
-- can start one inside its own transaction, and the wake-up channel.

-- The NOTIFY channel idle workers of this schema LISTEN on. Notifications are
-- hints only: polling stays the correctness mechanism.
CREATE FUNCTION {schema}.wake_channel() RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT left('cairn_wake_' || '{schema_name}', 63) $$;

-- The one place audit events are written: $1 is a JSON array of
-- {run_id, step, attempt, kind, field, value}, inserted in one statement.
CREATE FUNCTION {schema}.append_events(p_events jsonb) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  inserted integer;
BEGIN
  INSERT INTO {schema}.run_events (run_id, step, attempt, kind, field, value)
  SELECT e.run_id, e.step, coalesce(e.attempt, 0), e.kind, e.field, e.value
  FROM jsonb_to_recordset(p_events)
    AS e(run_id uuid, step text, attempt integer, kind text, field text, value jsonb);
  GET DIAGNOSTICS inserted = ROW_COUNT;
  RETURN inserted;
END $$;

-- The one place a run is inserted. With a key, a second call returns the
-- existing run and created = false.
CREATE FUNCTION {schema}.create_run(
  p_namespace text, p_workflow text, p_definition_version integer, p_definition_hash text,
  p_key text, p_queue text, p_priority integer, p_input jsonb, p_context jsonb,
  p_cursor text, p_run_at timestamptz, p_parent_run_id uuid,
  OUT run {schema}.runs, OUT created boolean)
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO {schema}.runs (namespace, workflow, definition_version, definition_hash, run_key,
                             queue, priority, input, context, cursor, run_at, parent_run_id)
  VALUES (p_namespace, p_workflow, p_definition_version, p_definition_hash, p_key,
          p_queue, p_priority, coalesce(p_input, '{}'::jsonb), coalesce(p_context, '{}'::jsonb),
          p_cursor, coalesce(p_run_at, now()), p_parent_run_id)
  ON CONFLICT (namespace, workflow, run_key) DO NOTHING
  RETURNING * INTO run;
  created := FOUND;
  IF NOT created THEN
    SELECT * INTO run FROM {schema}.runs r
    WHERE r.namespace = p_namespace AND r.workflow = p_workflow AND r.run_key = p_key;
  ELSIF run.run_at <= now() THEN
    -- Tiny payload; identical notifications in one transaction are merged.
    PERFORM pg_notify({schema}.wake_channel(), run.queue);
  END IF;
END $$;

-- Starts a run of the newest registered definition of p_workflow (or of
-- p_version). Returns the run id; with a key, the existing run's id.
CREATE FUNCTION {schema}.start_run(
  p_workflow text, p_input jsonb DEFAULT '{}'::jsonb, p_key text DEFAULT NULL,
  p_queue text DEFAULT NULL, p_priority integer DEFAULT 0, p_run_at timestamptz DEFAULT NULL,
  p_namespace text DEFAULT 'default', p_version integer DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
  d {schema}.workflow_definitions;
  result record;
BEGIN
  IF p_input IS NOT NULL AND jsonb_typeof(p_input) <> 'object' THEN
    RAISE EXCEPTION 'run input must be a JSON object, got %', jsonb_typeof(p_input)
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT * INTO d FROM {schema}.workflow_definitions w
  WHERE w.workflow = p_workflow AND (p_version IS NULL OR w.version = p_version)
  ORDER BY w.version DESC, w.registered_at DESC LIMIT 1;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'unknown workflow "%"%', p_workflow,
      CASE WHEN p_version IS NULL THEN '' ELSE ' version ' || p_version END
      USING ERRCODE = 'no_data_found',
            HINT = 'a worker registers the workflows it has loaded when it starts';
  END IF;
  SELECT * INTO result FROM {schema}.create_run(
    p_namespace, p_workflow, d.version, d.hash, p_key,
    coalesce(p_queue, d.definition->>'queue', 'default'), coalesce(p_priority, 0),
    p_input, '{}'::jsonb, d.first_step, p_run_at, NULL);
  RETURN (result.run).id;
END $$;
