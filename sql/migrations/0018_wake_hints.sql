-- Schema 18: wake hints a session can turn off.
--
-- A transaction that notifies takes one database-wide lock at commit and
-- holds it through its WAL flush, so notifying transactions commit one at a
-- time: starts from many sessions, one run per transaction, lose the group
-- commit and run no faster than from one session. A producer that starts
-- runs at such rates sets cairn.wake_hints to off (for its role, session or
-- transaction): its starts and signals then notify nobody, and the daemons
-- find the runs at their next claim (at once under a backlog, else within
-- worker.poll_interval). Every other session keeps its hints.
--
-- {schema}.wake is now the one place that notifies; the functions that
-- called pg_notify themselves are redefined with it, unchanged otherwise.
-- Adds one function and replaces five: rewrites nothing.

-- Tells the daemons serving p_queue that it has a due run, unless this
-- session turned wake hints off. Any value but on or off is refused, so a
-- misspelt setting fails the start instead of silently doing the other.
CREATE OR REPLACE FUNCTION {schema}.wake(p_queue text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  hints text := coalesce(nullif(current_setting('cairn.wake_hints', true), ''), 'on');
BEGIN
  IF hints = 'on' THEN
    -- Tiny payload; identical notifications in one transaction are merged.
    PERFORM pg_notify({schema}.wake_channel(), p_queue);
  ELSIF hints <> 'off' THEN
    RAISE EXCEPTION 'cairn.wake_hints is "%": set it to on or off', hints
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
END $$;

-- As in schema 10 (key scopes), waking through {schema}.wake.
CREATE OR REPLACE FUNCTION {schema}.create_run(
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
        PERFORM {schema}.wake(run.queue);
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

-- As in schema 4 (named signal there), waking through {schema}.wake.
CREATE OR REPLACE FUNCTION {schema}.deliver_signal(
  p_key text, p_payload jsonb DEFAULT '{}'::jsonb,
  p_inbox_retention interval DEFAULT interval '1 day')
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  w record;
  r record;
BEGIN
  IF p_key IS NULL OR p_key = '' THEN
    RAISE EXCEPTION 'signal: the correlation key is empty' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM {schema}.lock_wait_key(p_key);
  UPDATE {schema}.wait_records
  SET status = 'RESUMING', claimant = 'signal', payload = coalesce(p_payload, '{}'::jsonb),
      claimed_at = now()
  WHERE correlation_key = p_key AND status = 'WAITING'
    AND (expires_at IS NULL OR expires_at > now())
  RETURNING run_id, event INTO w;
  IF FOUND THEN
    UPDATE {schema}.runs
    SET status = 'ready', run_at = now(), version = version + 1, updated_at = now()
    WHERE id = w.run_id AND status = 'waiting'
    RETURNING id, queue, cursor INTO r;
    IF FOUND THEN
      INSERT INTO {schema}.run_events (run_id, step, kind, value)
      VALUES (r.id, r.cursor, 'signalled', jsonb_build_object('event', w.event, 'key', p_key));
      PERFORM {schema}.wake(r.queue);
    END IF;
    RETURN 'delivered';
  END IF;
  SELECT status, expires_at IS NOT NULL AND expires_at <= now() AS expired INTO w
  FROM {schema}.wait_records WHERE correlation_key = p_key;
  IF FOUND THEN
    RETURN CASE
      WHEN w.status = 'EXPIRED' OR (w.status = 'WAITING' AND w.expired) THEN 'expired'
      WHEN w.status = 'CANCELLED' THEN 'cancelled'
      ELSE 'already_delivered' END;
  END IF;
  INSERT INTO {schema}.signal_inbox (correlation_key, payload, expires_at)
  VALUES (p_key, coalesce(p_payload, '{}'::jsonb), now() + p_inbox_retention)
  ON CONFLICT (correlation_key) DO UPDATE
    SET payload = EXCLUDED.payload, created_at = now(), expires_at = EXCLUDED.expires_at
    WHERE {schema}.signal_inbox.expires_at <= now();
  RETURN CASE WHEN FOUND THEN 'stored' ELSE 'already_delivered' END;
END $$;

-- As in schema 5, with schema 6's attributes, waking through {schema}.wake.
CREATE OR REPLACE FUNCTION {schema}.cancel_run(
  p_run_id uuid, p_reason text DEFAULT 'cancelled',
  OUT outcome text, OUT run_status text, OUT run_version bigint, OUT waits_cancelled integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
DECLARE
  current record;
  child uuid;
BEGIN
  waits_cancelled := 0;
  -- Lock the unfinished descendants first, deepest first: a child that
  -- finishes locks its own row, then its parent's. Taking them in the same
  -- order makes a cancel that races a child's checkpoint wait for it rather
  -- than deadlock with it.
  PERFORM 1 FROM (
    WITH RECURSIVE tree(id, depth) AS (
      SELECT c.id, 1 FROM {schema}.runs c WHERE c.parent_run_id = p_run_id
      UNION ALL
      SELECT c.id, t.depth + 1 FROM {schema}.runs c JOIN tree t ON c.parent_run_id = t.id)
    SELECT id, depth FROM tree) t
  JOIN {schema}.runs d ON d.id = t.id
  WHERE d.finished_at IS NULL
  ORDER BY t.depth DESC, d.id
  FOR UPDATE OF d;
  -- Its own statement: the ones after it see whatever a checkpoint we queued
  -- behind committed (its wait records included).
  SELECT r.status, r.version, r.final_status, r.compensations, r.queue INTO current
  FROM {schema}.runs r WHERE r.id = p_run_id FOR UPDATE;
  IF NOT FOUND THEN
    outcome := 'unknown';
    RETURN;
  END IF;
  run_status := current.status;
  run_version := current.version;
  IF current.status IN ('completed', 'failed', 'cancelled', 'compensation_failed') THEN
    outcome := 'already_finished';
    RETURN;
  END IF;
  IF current.final_status IS NOT NULL THEN
    outcome := 'compensating';
    RETURN;
  END IF;
  -- An unwinding run's attempts and error are its compensations' from now on.
  UPDATE {schema}.runs r
  SET status = {schema}.ending_status('cancelled', r.compensations),
      final_status = CASE WHEN {schema}.unwinds(r.compensations) THEN 'cancelled' END,
      attempt = CASE WHEN {schema}.unwinds(r.compensations) THEN 0 ELSE r.attempt END,
      error = CASE WHEN {schema}.unwinds(r.compensations) THEN NULL ELSE r.error END,
      cancel_reason = p_reason, lease_owner = NULL, lease_expires_at = NULL, run_at = now(),
      version = r.version + 1, updated_at = now(),
      finished_at = CASE WHEN NOT {schema}.unwinds(r.compensations) THEN now() END
  WHERE r.id = p_run_id
  RETURNING r.version, r.status INTO run_version, run_status;
  UPDATE {schema}.wait_records w SET status = 'CANCELLED', finished_at = now()
  WHERE w.run_id = p_run_id AND w.status IN ('WAITING', 'RESUMING');
  GET DIAGNOSTICS waits_cancelled = ROW_COUNT;
  INSERT INTO {schema}.run_events (run_id, kind, value)
  VALUES (p_run_id, 'cancelled', jsonb_build_object(
    'reason', p_reason, 'compensations', jsonb_array_length(current.compensations)));
  IF run_status = 'compensating' THEN
    PERFORM {schema}.wake(current.queue);
  END IF;
  FOR child IN SELECT c.id FROM {schema}.runs c
               WHERE c.parent_run_id = p_run_id AND c.finished_at IS NULL
               ORDER BY c.created_at, c.id LOOP
    PERFORM {schema}.cancel_run(child, 'parent run ' || p_run_id || ' was cancelled');
  END LOOP;
  outcome := 'cancelled';
END $$;

-- As in schema 5, with schema 6's attributes, waking through {schema}.wake.
CREATE OR REPLACE FUNCTION {schema}.retry_run(
  p_run_id uuid, OUT outcome text, OUT run_status text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
DECLARE
  current record;
BEGIN
  SELECT r.status, r.queue, r.cursor, r.final_status INTO current
  FROM {schema}.runs r WHERE r.id = p_run_id FOR UPDATE;
  IF NOT FOUND THEN
    outcome := 'unknown';
    RETURN;
  END IF;
  run_status := current.status;
  IF current.status NOT IN ('failed', 'compensation_failed') THEN
    outcome := 'not_failed';
    RETURN;
  END IF;
  IF current.status = 'failed' AND current.final_status IS NOT NULL THEN
    outcome := 'compensated';
    RETURN;
  END IF;
  UPDATE {schema}.runs r
  SET status = {schema}.due_status(r.final_status), attempt = 0, run_at = now(),
      finished_at = NULL, version = r.version + 1, updated_at = now()
  WHERE r.id = p_run_id
  RETURNING r.status INTO run_status;
  INSERT INTO {schema}.run_events (run_id, step, kind) VALUES (p_run_id, current.cursor, 'retry_requested');
  PERFORM {schema}.wake(current.queue);
  outcome := 'retried';
END $$;

-- As in schema 16, waking through {schema}.wake.
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
    PERFORM {schema}.wake(o.queue);
  END IF;
  RETURN QUERY SELECT s.id, s.created FROM unnest(ids, created) AS s(id, created);
END $$;
