-- Schema 16: a cheaper hot path. A step that carries its run forward and a
-- lease renewal change no indexed column, so PostgreSQL can write them as
-- HOT updates (a new row version on the same page, no index entry at all).
-- Run ids are time-ordered, so new runs fill the primary key at its right
-- edge instead of dirtying a random leaf page each.
-- start_runs starts many runs in one statement.
-- Builds one unique index over the runs with a key (a pass over the table,
-- which blocks writes to runs while it lasts), drops three indexes, changes
-- a column default and adds functions: rewrites nothing.

-- Every checkpoint and every renewal moves lease_expires_at, so an index on
-- it made every one of them a non-HOT update with a new entry in each index
-- of runs. The reaper reads runs_running_idx (migration 12) instead: it
-- holds the running runs alone, one per busy slot of the fleet, and the
-- reaper filters their expiries.
DROP INDEX IF EXISTS {schema}.runs_lease_idx;

-- One run ever per forever key, as in migration 10, over the runs that have
-- a key only: the old index held every run without a key too (their null
-- keys never conflict), an entry for each at each start, claim and end.
CREATE UNIQUE INDEX IF NOT EXISTS runs_forever_key_idx
  ON {schema}.runs (namespace, workflow, run_key) WHERE key_scope = 'forever' AND run_key IS NOT NULL;
DROP INDEX IF EXISTS {schema}.runs_key_forever_idx;

-- No query reads history by time alone (history pages by run and position,
-- retention deletes by run), and every event paid an entry here.
DROP INDEX IF EXISTS {schema}.run_events_created_idx;

-- A version 7 UUID (RFC 9562): 48 bits of Unix time in milliseconds, then
-- random bits. Ids stay unique and unguessable, and increase with time.
CREATE OR REPLACE FUNCTION {schema}.time_ordered_uuid() RETURNS uuid
LANGUAGE sql VOLATILE AS $$
  SELECT encode(set_byte(overlay(r PLACING substring(int8send(
                             floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                           FROM 1 FOR 6),
                         6, (get_byte(r, 6) & 15) | 112), 'hex')::uuid
  FROM uuid_send(gen_random_uuid()) AS r
$$;

ALTER TABLE {schema}.runs ALTER COLUMN id SET DEFAULT {schema}.time_ordered_uuid();

-- What every start of p_workflow checks and derives, however many runs it
-- starts: the options, the definition it starts on (the newest registered,
-- or p_version) and the queue, key scope and deadline that follow.
CREATE OR REPLACE FUNCTION {schema}.start_options(
  p_workflow text, p_queue text, p_run_at timestamptz, p_version integer,
  p_deadline interval, p_key_scope text,
  OUT definition {schema}.workflow_definitions, OUT queue text, OUT key_scope text,
  OUT deadline_at timestamptz)
LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF p_deadline IS NOT NULL AND p_deadline <= interval '0' THEN
    RAISE EXCEPTION 'the run''s deadline must be longer than 0, got %', p_deadline
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF p_key_scope IS NOT NULL AND p_key_scope NOT IN ('forever', 'unfinished') THEN
    RAISE EXCEPTION 'the key scope must be forever or unfinished, got "%"', p_key_scope
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT * INTO definition FROM {schema}.workflow_definitions w
  WHERE w.workflow = p_workflow AND (p_version IS NULL OR w.version = p_version)
  ORDER BY w.version DESC, w.registered_at DESC LIMIT 1;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'unknown workflow "%"%', p_workflow,
      CASE WHEN p_version IS NULL THEN '' ELSE ' version ' || p_version END
      USING ERRCODE = 'no_data_found',
            HINT = 'a worker registers the workflows it has loaded when it starts';
  END IF;
  queue := coalesce(p_queue, definition.definition->>'queue', 'default');
  key_scope := coalesce(p_key_scope, definition.definition->>'key_scope', 'forever');
  deadline_at := greatest(now(), coalesce(p_run_at, now()))
                 + coalesce(p_deadline,
                            (definition.definition->>'deadline_ms')::bigint * interval '1 millisecond');
END $$;

-- As in version 10, its options checked and derived by start_options, which
-- start_runs shares.
CREATE OR REPLACE FUNCTION {schema}.start_run_outcome(
  p_workflow text, p_input jsonb DEFAULT '{}'::jsonb, p_key text DEFAULT NULL,
  p_queue text DEFAULT NULL, p_priority integer DEFAULT 0, p_run_at timestamptz DEFAULT NULL,
  p_namespace text DEFAULT 'default', p_version integer DEFAULT NULL,
  p_deadline interval DEFAULT NULL, p_key_scope text DEFAULT NULL)
RETURNS {schema}.started_run
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
DECLARE
  o record;
  result record;
BEGIN
  IF p_input IS NOT NULL AND jsonb_typeof(p_input) <> 'object' THEN
    RAISE EXCEPTION 'run input must be a JSON object, got %', jsonb_typeof(p_input)
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT * INTO o FROM {schema}.start_options(p_workflow, p_queue, p_run_at, p_version,
                                              p_deadline, p_key_scope);
  PERFORM {schema}.check_key('the run key', p_key);
  PERFORM {schema}.check_size('max_input_bytes', 'the run''s input', {schema}.json_bytes(p_input));
  SELECT * INTO result FROM {schema}.create_run(
    p_namespace, p_workflow, (o.definition).version, (o.definition).hash, p_key, o.queue,
    coalesce(p_priority, 0), p_input, '{}'::jsonb, (o.definition).first_step, p_run_at, NULL,
    o.deadline_at, o.key_scope);
  RETURN ROW((result.run).id, result.created)::{schema}.started_run;
END $$;

-- Starts one run of p_workflow per element of p_inputs (a JSON array of
-- input objects), in one statement: the set-based start_run_outcome, for
-- bulk starts. p_keys: null, or one run key (or null) per input. The other
-- options apply to every run, as in start_run_outcome. Returns one row per
-- input, in their order: the run (or the run that holds its key) and whether
-- this call created it. All or nothing: one refused input refuses them all.
-- The inputs are inserted by one INSERT; an input whose key is taken (by an
-- earlier run or an earlier input of the same call) goes through create_run,
-- which finds the run that holds it.
CREATE OR REPLACE FUNCTION {schema}.start_runs(
  p_workflow text, p_inputs jsonb, p_keys text[] DEFAULT NULL,
  p_queue text DEFAULT NULL, p_priority integer DEFAULT 0, p_run_at timestamptz DEFAULT NULL,
  p_namespace text DEFAULT 'default', p_version integer DEFAULT NULL,
  p_deadline interval DEFAULT NULL, p_key_scope text DEFAULT NULL)
RETURNS SETOF {schema}.started_run
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
DECLARE
  o record;
  refused record;
  ids uuid[];
  created boolean[];
  taken bigint[];
  n bigint;
  holder record;
BEGIN
  IF jsonb_typeof(p_inputs) IS DISTINCT FROM 'array' THEN
    RAISE EXCEPTION 'the runs'' inputs must be a JSON array, got %',
      coalesce(jsonb_typeof(p_inputs), 'null') USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF p_keys IS NOT NULL AND cardinality(p_keys) <> jsonb_array_length(p_inputs) THEN
    RAISE EXCEPTION '% run keys for % inputs: give one key (or null) per input, or no keys',
      cardinality(p_keys), jsonb_array_length(p_inputs) USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT * INTO o FROM {schema}.start_options(p_workflow, p_queue, p_run_at, p_version,
                                              p_deadline, p_key_scope);
  -- One pass over the inputs: the first that is not an object, and the
  -- largest, which check_size holds to the cap of every input.
  SELECT i.n, jsonb_typeof(i.input) AS type, {schema}.json_bytes(i.input) AS bytes INTO refused
  FROM jsonb_array_elements(p_inputs) WITH ORDINALITY AS i(input, n)
  ORDER BY jsonb_typeof(i.input) = 'object', {schema}.json_bytes(i.input) DESC LIMIT 1;
  IF refused.type <> 'object' THEN
    RAISE EXCEPTION 'run input % must be a JSON object, got %', refused.n, refused.type
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM {schema}.check_size('max_input_bytes', 'the input of run ' || refused.n, refused.bytes);
  PERFORM {schema}.check_key('the run key', k) FROM unnest(p_keys) AS k WHERE k IS NOT NULL;

  WITH given AS MATERIALIZED (
    SELECT i.n, i.input, k.key, {schema}.time_ordered_uuid() AS id
    FROM jsonb_array_elements(p_inputs) WITH ORDINALITY AS i(input, n)
    LEFT JOIN unnest(p_keys) WITH ORDINALITY AS k(key, n) USING (n)
  ), inserted AS (
    INSERT INTO {schema}.runs (id, namespace, workflow, definition_version, definition_hash,
                               run_key, key_scope, queue, priority, input, context, cursor,
                               run_at, deadline_at)
    SELECT g.id, p_namespace, p_workflow, (o.definition).version, (o.definition).hash, g.key,
           o.key_scope, o.queue, coalesce(p_priority, 0), g.input, '{}'::jsonb,
           (o.definition).first_step, coalesce(p_run_at, now()), o.deadline_at
    FROM given g ORDER BY g.n
    ON CONFLICT DO NOTHING
    RETURNING id)
  SELECT array_agg(g.id ORDER BY g.n), array_agg(i.id IS NOT NULL ORDER BY g.n),
         array_agg(g.n ORDER BY g.n) FILTER (WHERE i.id IS NULL)
  INTO ids, created, taken
  FROM given g LEFT JOIN inserted i USING (id);

  FOREACH n IN ARRAY coalesce(taken, '{}') LOOP
    SELECT * INTO holder FROM {schema}.create_run(
      p_namespace, p_workflow, (o.definition).version, (o.definition).hash, p_keys[n], o.queue,
      coalesce(p_priority, 0), p_inputs->(n::integer - 1), '{}'::jsonb, (o.definition).first_step,
      p_run_at, NULL, o.deadline_at, o.key_scope);
    ids[n] := (holder.run).id;
    created[n] := holder.created;
  END LOOP;
  IF true = ANY(created) AND coalesce(p_run_at, now()) <= now() THEN
    PERFORM pg_notify({schema}.wake_channel(), o.queue);
  END IF;
  RETURN QUERY SELECT s.id, s.created FROM unnest(ids, created) AS s(id, created);
END $$;

DO $grant$
BEGIN
  EXECUTE format('GRANT EXECUTE ON FUNCTION {schema}.start_runs(text, jsonb, text[], text, integer, '
                 'timestamptz, text, integer, interval, text) TO %I', {schema}.role_name('app'));
END $grant$;
