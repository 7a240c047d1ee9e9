-- Schema 8: whole-run deadlines. A run may carry an absolute deadline
-- (deadline_at), fixed in database time when it starts: from the start's own
-- p_deadline, or else the definition's `deadline:` (deadline_ms in its
-- registered JSON). When it passes, the run fails with code
-- 'deadline_exceeded' whatever it is doing, and unwinds first when it owes
-- compensations: the sweeper fails runs that are ready (due, sleeping,
-- backing off) or waiting (expire_deadlines), and a checkpoint committed
-- after the deadline lands but ends the run (save_checkpoint).
-- Adding a nullable column without a default rewrites nothing.

ALTER TABLE {schema}.runs ADD COLUMN IF NOT EXISTS deadline_at timestamptz;

-- The sweeper finds runs past their deadline that no worker holds. Rows
-- without a deadline are not in the index, so it costs them nothing.
CREATE INDEX IF NOT EXISTS runs_deadline_idx ON {schema}.runs (deadline_at)
  WHERE deadline_at IS NOT NULL AND status IN ('ready', 'waiting');

-- The events of a run that fails for good with `p_code` outside a step's own
-- plan (a cap, a deadline): 'failed', then 'compensating' when it unwinds.
-- The same kinds and values a failed step writes.
CREATE FUNCTION {schema}.failure_events(
  p_run_id uuid, p_step text, p_attempt integer, p_code text, p_error text,
  p_compensations jsonb)
RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_array(jsonb_build_object(
           'run_id', p_run_id, 'step', p_step, 'attempt', p_attempt, 'kind', 'failed',
           'value', jsonb_build_object('code', p_code, 'error', p_error)))
         || CASE WHEN {schema}.unwinds(p_compensations) THEN jsonb_build_array(jsonb_build_object(
              'run_id', p_run_id, 'step', p_step, 'attempt', p_attempt, 'kind', 'compensating',
              'value', jsonb_build_object('compensations', jsonb_array_length(p_compensations))))
            ELSE '[]'::jsonb END
$$;

-- As in version 6, through failure_events.
CREATE OR REPLACE FUNCTION {schema}.history_limit_events(
  p_run_id uuid, p_step text, p_attempt integer, p_error text, p_compensations jsonb)
RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT {schema}.failure_events(p_run_id, p_step, p_attempt, 'history_limit', p_error,
                                 p_compensations)
$$;

-- The error of a run that failed at its deadline.
CREATE FUNCTION {schema}.deadline_error(p_deadline_at timestamptz) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT 'the run passed its deadline of ' || p_deadline_at::text
$$;

-- As in version 2, with the run's deadline.
DROP FUNCTION {schema}.create_run(text, text, integer, text, text, text, integer, jsonb, jsonb,
                                  text, timestamptz, uuid);
CREATE FUNCTION {schema}.create_run(
  p_namespace text, p_workflow text, p_definition_version integer, p_definition_hash text,
  p_key text, p_queue text, p_priority integer, p_input jsonb, p_context jsonb,
  p_cursor text, p_run_at timestamptz, p_parent_run_id uuid, p_deadline_at timestamptz DEFAULT NULL,
  OUT run {schema}.runs, OUT created boolean)
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO {schema}.runs (namespace, workflow, definition_version, definition_hash, run_key,
                             queue, priority, input, context, cursor, run_at, parent_run_id,
                             deadline_at)
  VALUES (p_namespace, p_workflow, p_definition_version, p_definition_hash, p_key,
          p_queue, p_priority, coalesce(p_input, '{}'::jsonb), coalesce(p_context, '{}'::jsonb),
          p_cursor, coalesce(p_run_at, now()), p_parent_run_id, p_deadline_at)
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

-- As in version 6, with p_deadline: how long the run may take, counted from
-- when it is due (now, or p_run_at when that is later). Null takes the
-- definition's deadline, if it has one. Existing calls, positional or
-- named, mean what they meant.
DROP FUNCTION {schema}.start_run(text, jsonb, text, text, integer, timestamptz, text, integer);
CREATE FUNCTION {schema}.start_run(
  p_workflow text, p_input jsonb DEFAULT '{}'::jsonb, p_key text DEFAULT NULL,
  p_queue text DEFAULT NULL, p_priority integer DEFAULT 0, p_run_at timestamptz DEFAULT NULL,
  p_namespace text DEFAULT 'default', p_version integer DEFAULT NULL,
  p_deadline interval DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
DECLARE
  d {schema}.workflow_definitions;
  deadline interval;
  result record;
BEGIN
  IF p_input IS NOT NULL AND jsonb_typeof(p_input) <> 'object' THEN
    RAISE EXCEPTION 'run input must be a JSON object, got %', jsonb_typeof(p_input)
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF p_deadline IS NOT NULL AND p_deadline <= interval '0' THEN
    RAISE EXCEPTION 'the run''s deadline must be longer than 0, got %', p_deadline
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM {schema}.check_key('the run key', p_key);
  PERFORM {schema}.check_size('max_input_bytes', 'the run''s input', {schema}.json_bytes(p_input));
  SELECT * INTO d FROM {schema}.workflow_definitions w
  WHERE w.workflow = p_workflow AND (p_version IS NULL OR w.version = p_version)
  ORDER BY w.version DESC, w.registered_at DESC LIMIT 1;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'unknown workflow "%"%', p_workflow,
      CASE WHEN p_version IS NULL THEN '' ELSE ' version ' || p_version END
      USING ERRCODE = 'no_data_found',
            HINT = 'a worker registers the workflows it has loaded when it starts';
  END IF;
  deadline := coalesce(p_deadline,
                       (d.definition->>'deadline_ms')::bigint * interval '1 millisecond');
  SELECT * INTO result FROM {schema}.create_run(
    p_namespace, p_workflow, d.version, d.hash, p_key,
    coalesce(p_queue, d.definition->>'queue', 'default'), coalesce(p_priority, 0),
    p_input, '{}'::jsonb, d.first_step, p_run_at, NULL,
    greatest(now(), coalesce(p_run_at, now())) + deadline);
  RETURN (result.run).id;
END $$;

DO $grant$
BEGIN
  EXECUTE format('GRANT EXECUTE ON FUNCTION {schema}.start_run(text, jsonb, text, text, integer, '
                 'timestamptz, text, integer, interval) TO %I', {schema}.role_name('app'));
END $grant$;
