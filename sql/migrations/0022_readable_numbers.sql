-- Schema 22: JSON numbers the daemons can read, or a refusal.
--
-- jsonb holds numbers of any size; cairn's daemons read JSON numbers as
-- doubles. A run started with a number past the largest double (1e400, say)
-- was claimed by a worker that could not read it, left to its lease, and
-- failed only by the crash limit; a signal's payload with one broke the run
-- it resumed, an idempotency result the step that read it. The four entries
-- of the SQL API that take a caller's JSON now refuse such a number, naming
-- where it is (SQLSTATE 22003), before they change anything. Adds two
-- functions and replaces four, each as it was but for the check: rewrites
-- nothing.

-- The first number in p_value that a double cannot hold, or null. Doubles
-- end below 2^1024 - 2^970: from there on, a decimal rounds up past the
-- largest double (1.7976931348623157e308). A number far below zero (1e-400)
-- reads as zero, and passes. p_longest is the length of p_value's text, or
-- of its longest element's: such a number has 309 digits or more, and jsonb
-- writes numbers digit by digit, without an exponent, so a shorter text
-- holds none and is not searched (a search costs 2 to 4 µs for each small
-- object in p_value; a bulk start of 1000 inputs, 25 ms). The bound is
-- written out, digit by digit: jsonb_build_object, which could pass it as a
-- variable, is stable, and would keep this function from being inlined into
-- its caller (25 µs more for each start).
CREATE OR REPLACE FUNCTION {schema}.unreadable_number(p_value jsonb, p_longest bigint)
RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_longest >= 309 THEN jsonb_path_query_first(p_value,
    ('strict $.** ? (@.type() == "number" && @.abs() >= '
    || '1797693134862315807937289714053034150799341327100378269361737789804449'
    || '6829276475094664901797758720709633028641669288791094655554785194040263'
    || '0657488671505820681908902000708383676273854845817711531764475730270069'
    || '8555713669596228429148198608349364752927190741684443655107043427115596'
    || '99508093042880177904174497792'
    || ')')::jsonpath) END
$$;

-- Nothing, or the error that names p_what and the number in it that a
-- double cannot hold. p_bytes: the length of p_value's text.
CREATE OR REPLACE FUNCTION {schema}.check_numbers(p_what text, p_value jsonb, p_bytes bigint)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  number text := {schema}.unreadable_number(p_value, p_bytes)::text;
BEGIN
  IF number IS NOT NULL THEN
    RAISE EXCEPTION '% holds a number of % digits (%...), beyond the largest number a double '
                    'holds (1.7976931348623157e308), which is as far as cairn reads JSON numbers',
      p_what, length(split_part(ltrim(number, '-'), '.', 1)), left(number, 12)
      USING ERRCODE = 'numeric_value_out_of_range';
  END IF;
END $$;

-- As in schema 16, checking the input's numbers.
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
  bytes bigint := {schema}.json_bytes(p_input);
BEGIN
  IF p_input IS NOT NULL AND jsonb_typeof(p_input) <> 'object' THEN
    RAISE EXCEPTION 'run input must be a JSON object, got %', jsonb_typeof(p_input)
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT * INTO o FROM {schema}.start_options(p_workflow, p_queue, p_run_at, p_version,
                                              p_deadline, p_key_scope);
  PERFORM {schema}.check_key('the run key', p_key);
  PERFORM {schema}.check_size('max_input_bytes', 'the run''s input', bytes);
  PERFORM {schema}.check_numbers('the run''s input', p_input, bytes);
  SELECT * INTO result FROM {schema}.create_run(
    p_namespace, p_workflow, (o.definition).version, (o.definition).hash, p_key, o.queue,
    coalesce(p_priority, 0), p_input, '{}'::jsonb, (o.definition).first_step, p_run_at, NULL,
    o.deadline_at, o.key_scope);
  RETURN ROW((result.run).id, result.created)::{schema}.started_run;
END $$;

-- As in schema 18, checking the inputs' numbers.
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
  -- One search of all the inputs, if the longest is long enough to hold an
  -- unreadable number; only a refusal searches them one by one, to name it.
  IF {schema}.unreadable_number(p_inputs, refused.bytes) IS NOT NULL THEN
    PERFORM {schema}.check_numbers('the input of run ' || i.n, i.input, {schema}.json_bytes(i.input))
    FROM jsonb_array_elements(p_inputs) WITH ORDINALITY AS i(input, n) ORDER BY i.n;
  END IF;
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
    PERFORM {schema}.wake(o.queue);
  END IF;
  RETURN QUERY SELECT s.id, s.created FROM unnest(ids, created) AS s(id, created);
END $$;

-- As in schema 6, checking the payload's numbers.
CREATE OR REPLACE FUNCTION {schema}.signal(
  p_key text, p_payload jsonb DEFAULT '{}'::jsonb,
  p_inbox_retention interval DEFAULT interval '1 day')
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
DECLARE
  longest bigint := {schema}.limit_of('max_inbox_retention_seconds');
  bytes bigint := {schema}.json_bytes(p_payload);
BEGIN
  IF p_key IS NULL THEN
    RAISE EXCEPTION 'the correlation key is empty' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM {schema}.check_key('the correlation key', p_key);
  PERFORM {schema}.check_size('max_signal_payload_bytes', 'the signal''s payload', bytes);
  PERFORM {schema}.check_numbers('the signal''s payload', p_payload, bytes);
  IF p_inbox_retention IS NULL OR p_inbox_retention < interval '0' THEN
    RAISE EXCEPTION 'the inbox retention must not be negative, got %', p_inbox_retention
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF p_inbox_retention > longest * interval '1 second' THEN
    RAISE EXCEPTION 'the inbox retention is % seconds, over the limit of % seconds '
                    '(max_inbox_retention_seconds in %.limits)',
      floor(extract(epoch FROM p_inbox_retention)), longest, '{schema_name}'
      USING ERRCODE = 'program_limit_exceeded';
  END IF;
  RETURN {schema}.deliver_signal(p_key, p_payload, p_inbox_retention);
END $$;

-- As in schema 9, checking the result's numbers.
CREATE OR REPLACE FUNCTION {schema}.idempotency_complete(
  p_key text, p_owner text, p_result jsonb, p_ttl interval, p_namespace text DEFAULT 'default')
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
DECLARE
  bytes bigint := {schema}.json_bytes(coalesce(p_result, 'null'::jsonb));
BEGIN
  IF p_ttl IS NULL THEN
    RAISE EXCEPTION 'the idempotency ttl is missing' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM {schema}.idempotency_check_args(p_namespace, p_key, coalesce(p_owner, ''));
  PERFORM {schema}.check_size('max_idempotency_result_bytes', 'the idempotency result', bytes);
  PERFORM {schema}.check_numbers('the idempotency result', p_result, bytes);
  UPDATE {schema}.idempotency_keys
  SET status = 'completed', result = coalesce(p_result, 'null'::jsonb), completed_at = now(),
      expires_at = now() + p_ttl
  WHERE namespace = p_namespace AND key = p_key AND owner = p_owner AND status = 'in_progress';
  RETURN FOUND;
END $$;
