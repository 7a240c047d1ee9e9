-- Schema 10: start keys with a scope. A run started with a key in scope
-- 'forever' (as every keyed run before this version) is the one run of its
-- key ever; in scope 'unfinished' it is the one unfinished run of its key,
-- and the key starts a new run once it has finished (say, one reindex per
-- tenant at a time). Whatever the scope, a key names at most one unfinished
-- run. Starting with a key that is taken returns the run that holds it;
-- start_run_outcome also says whether the call created it.
-- Builds two unique indexes over runs (a pass over the table, which blocks
-- writes to runs while it lasts) and drops the old constraint; the new
-- column's constant default rewrites nothing.

ALTER TABLE {schema}.runs ADD COLUMN IF NOT EXISTS key_scope text NOT NULL DEFAULT 'forever';
ALTER TABLE {schema}.runs DROP CONSTRAINT IF EXISTS runs_key_scope_check;
ALTER TABLE {schema}.runs ADD CONSTRAINT runs_key_scope_check
  CHECK (key_scope IN ('forever', 'unfinished'));

-- One run ever per forever key; one unfinished run per key of either scope.
CREATE UNIQUE INDEX IF NOT EXISTS runs_key_forever_idx
  ON {schema}.runs (namespace, workflow, run_key) WHERE key_scope = 'forever';
CREATE UNIQUE INDEX IF NOT EXISTS runs_key_unfinished_idx
  ON {schema}.runs (namespace, workflow, run_key)
  WHERE run_key IS NOT NULL AND finished_at IS NULL;
ALTER TABLE {schema}.runs DROP CONSTRAINT IF EXISTS runs_key_unique;

-- What a start did: the run that holds the key (or the new run), and
-- whether this call created it.
CREATE TYPE {schema}.started_run AS (run_id uuid, created boolean);

-- As in version 8, with p_key_scope. The run that holds a key taken in the
-- new run's scope: the unfinished one of either scope, else (a forever key)
-- the finished forever one. A holder that finished between the insert's
-- conflict and the look-up frees an unfinished key: the insert is tried
-- again.
DROP FUNCTION {schema}.create_run(text, text, integer, text, text, text, integer, jsonb, jsonb,
                                  text, timestamptz, uuid, timestamptz);
CREATE FUNCTION {schema}.create_run(
  p_namespace text, p_workflow text, p_definition_version integer, p_definition_hash text,
  p_key text, p_queue text, p_priority integer, p_input jsonb, p_context jsonb,
  p_cursor text, p_run_at timestamptz, p_parent_run_id uuid, p_deadline_at timestamptz DEFAULT NULL,
  p_key_scope text DEFAULT 'forever',
  OUT run {schema}.runs, OUT created boolean)
LANGUAGE plpgsql AS $$
BEGIN
  FOR tries IN 1..3 LOOP
    INSERT INTO {schema}.runs (namespace, workflow, definition_version, definition_hash, run_key,
                               key_scope, queue, priority, input, context, cursor, run_at,
                               parent_run_id, deadline_at)
    VALUES (p_namespace, p_workflow, p_definition_version, p_definition_hash, p_key,
            coalesce(p_key_scope, 'forever'), p_queue, p_priority,
            coalesce(p_input, '{}'::jsonb), coalesce(p_context, '{}'::jsonb),
            p_cursor, coalesce(p_run_at, now()), p_parent_run_id, p_deadline_at)
    ON CONFLICT DO NOTHING
    RETURNING * INTO run;
    created := FOUND;
    IF created THEN
      IF run.run_at <= now() THEN
        -- Tiny payload; identical notifications in one transaction are merged.
        PERFORM pg_notify({schema}.wake_channel(), run.queue);
      END IF;
      RETURN;
    END IF;
    SELECT * INTO run FROM {schema}.runs r
    WHERE r.namespace = p_namespace AND r.workflow = p_workflow AND r.run_key = p_key
      AND (r.finished_at IS NULL
           OR (coalesce(p_key_scope, 'forever') = 'forever' AND r.key_scope = 'forever'))
    ORDER BY r.finished_at IS NULL DESC
    LIMIT 1;
    IF FOUND THEN
      RETURN;
    END IF;
  END LOOP;
  -- Only a snapshot older than the holder (a repeatable-read caller) gets
  -- here: the caller's transaction must start again.
  RAISE EXCEPTION 'the run key "%" of workflow "%" is held by a run this transaction cannot see',
    p_key, p_workflow USING ERRCODE = 'serialization_failure';
END $$;

-- Starts a run of the newest registered definition of p_workflow (or of
-- p_version), or finds the run that holds p_key in its scope, and says which.
-- p_key_scope: 'forever' or 'unfinished'; null takes the definition's
-- key_scope, else 'forever'. The other arguments as in start_run.
CREATE FUNCTION {schema}.start_run_outcome(
  p_workflow text, p_input jsonb DEFAULT '{}'::jsonb, p_key text DEFAULT NULL,
  p_queue text DEFAULT NULL, p_priority integer DEFAULT 0, p_run_at timestamptz DEFAULT NULL,
  p_namespace text DEFAULT 'default', p_version integer DEFAULT NULL,
  p_deadline interval DEFAULT NULL, p_key_scope text DEFAULT NULL)
RETURNS {schema}.started_run
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
DECLARE
  d {schema}.workflow_definitions;
  deadline interval;
  scope text;
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
  IF p_key_scope IS NOT NULL AND p_key_scope NOT IN ('forever', 'unfinished') THEN
    RAISE EXCEPTION 'the key scope must be forever or unfinished, got "%"', p_key_scope
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
  scope := coalesce(p_key_scope, d.definition->>'key_scope', 'forever');
  SELECT * INTO result FROM {schema}.create_run(
    p_namespace, p_workflow, d.version, d.hash, p_key,
    coalesce(p_queue, d.definition->>'queue', 'default'), coalesce(p_priority, 0),
    p_input, '{}'::jsonb, d.first_step, p_run_at, NULL,
    greatest(now(), coalesce(p_run_at, now())) + deadline, scope);
  RETURN ROW((result.run).id, result.created)::{schema}.started_run;
END $$;

-- As in version 8, with p_key_scope: the run id that start_run_outcome
-- returns. Existing calls, positional or named, mean what they meant.
DROP FUNCTION {schema}.start_run(text, jsonb, text, text, integer, timestamptz, text, integer,
                                 interval);
CREATE FUNCTION {schema}.start_run(
  p_workflow text, p_input jsonb DEFAULT '{}'::jsonb, p_key text DEFAULT NULL,
  p_queue text DEFAULT NULL, p_priority integer DEFAULT 0, p_run_at timestamptz DEFAULT NULL,
  p_namespace text DEFAULT 'default', p_version integer DEFAULT NULL,
  p_deadline interval DEFAULT NULL, p_key_scope text DEFAULT NULL)
RETURNS uuid
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
  SELECT s.run_id
  FROM {schema}.start_run_outcome(p_workflow, p_input, p_key, p_queue, p_priority, p_run_at,
                                  p_namespace, p_version, p_deadline, p_key_scope) s
$$;

DO $grant$
BEGIN
  EXECUTE format('GRANT EXECUTE ON FUNCTION {schema}.start_run_outcome(text, jsonb, text, text, '
                 'integer, timestamptz, text, integer, interval, text) TO %I',
                 {schema}.role_name('app'));
  EXECUTE format('GRANT EXECUTE ON FUNCTION {schema}.start_run(text, jsonb, text, text, integer, '
                 'timestamptz, text, integer, interval, text) TO %I', {schema}.role_name('app'));
END $grant$;
