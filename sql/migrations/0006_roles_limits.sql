-- cairn schema, version 6: least privilege and limits. Three roles named
-- after the schema (see role_name): <schema>_owner owns every object and runs
-- the migrations, <schema>_worker is what `cairn run` needs, <schema>_app may
-- start, signal, cancel and retry runs and read them with their history.
-- The SQL API runs as the owner (SECURITY DEFINER, search_path pinned), so
-- the application needs no table rights; run_events is append-only for all
-- but the owner. The limits table holds the caps the API and checkpoints
-- enforce. docs/security.md describes all of it.

-- A role's name: <schema>_<kind>, or, when that would pass PostgreSQL's
-- 63-byte limit, the schema's first letters, 8 hex digits of its md5 and
-- the kind, so that two schemas never share roles by truncation.
CREATE FUNCTION {schema}.role_name(p_kind text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN octet_length('{schema_name}') + 1 + octet_length(p_kind) <= 63
              THEN '{schema_name}_' || p_kind
              ELSE left('{schema_name}', 53 - octet_length(p_kind)) || '_' ||
                   left(md5('{schema_name}'), 8) || '_' || p_kind END
$$;

-- Caps on what callers and steps may store, changeable by the owner
-- (UPDATE <schema>.limits SET value = ... WHERE name = ...); deleting a row
-- lifts that cap. Sizes are bytes of JSON text.
CREATE TABLE {schema}.limits (
  name        text PRIMARY KEY,
  value       bigint NOT NULL,
  description text NOT NULL,
  CONSTRAINT limits_value_check CHECK (value > 0)
);
INSERT INTO {schema}.limits (name, value, description) VALUES
  ('max_input_bytes', 1048576, 'a run''s input (start_run, child runs)'),
  ('max_signal_payload_bytes', 1048576, 'a signal''s payload'),
  ('max_context_bytes', 4194304, 'a run''s context, and its output, at each checkpoint'),
  ('max_inbox_retention_seconds', 2592000,
   'how long a signal may wait in the inbox for its wait (30 days)'),
  ('max_transitions_per_run', 50000,
   'checkpoints a run may commit; the next one fails it with code history_limit');

CREATE FUNCTION {schema}.limit_of(p_name text) RETURNS bigint
LANGUAGE sql STABLE AS $$
  SELECT l.value FROM {schema}.limits l WHERE l.name = p_name
$$;

-- Raises the error of a cap: SQLSTATE 54000 (program_limit_exceeded), which
-- the store reports as invalid input, naming the limit and the size.
CREATE FUNCTION {schema}.limit_exceeded(p_limit text, p_what text, p_bytes bigint)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% is % bytes, over the limit of % bytes (% in %.limits)',
    p_what, p_bytes, {schema}.limit_of(p_limit), p_limit, '{schema_name}'
    USING ERRCODE = 'program_limit_exceeded';
END $$;

-- True, or the error of p_limit when p_bytes exceeds it.
CREATE FUNCTION {schema}.check_size(p_limit text, p_what text, p_bytes bigint) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF p_bytes > {schema}.limit_of(p_limit) THEN
    PERFORM {schema}.limit_exceeded(p_limit, p_what, p_bytes);
  END IF;
  RETURN true;
END $$;

CREATE FUNCTION {schema}.json_bytes(p_value jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT octet_length(p_value::text)::bigint $$;

-- Run keys and correlation keys: not empty, at most 512 bytes (a btree entry
-- must stay well under PostgreSQL's 2704-byte index row limit).
CREATE FUNCTION {schema}.check_key(p_what text, p_key text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF p_key = '' THEN
    RAISE EXCEPTION '% is empty', p_what USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF octet_length(p_key) > 512 THEN
    RAISE EXCEPTION '% is % bytes, over the limit of 512 bytes', p_what, octet_length(p_key)
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
END $$;

-- What a run records when it reaches max_transitions_per_run: the error,
-- and the events of a failure (the same kinds a failed step writes).
CREATE FUNCTION {schema}.history_limit_error(p_transitions bigint) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT 'the run committed ' || p_transitions || ' transitions, the limit '
         || '(max_transitions_per_run in {schema_name}.limits); start a new run to go on'
$$;

CREATE FUNCTION {schema}.history_limit_events(
  p_run_id uuid, p_step text, p_attempt integer, p_error text, p_compensations jsonb)
RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_array(jsonb_build_object(
           'run_id', p_run_id, 'step', p_step, 'attempt', p_attempt, 'kind', 'failed',
           'value', jsonb_build_object('code', 'history_limit', 'error', p_error)))
         || CASE WHEN {schema}.unwinds(p_compensations) THEN jsonb_build_array(jsonb_build_object(
              'run_id', p_run_id, 'step', p_step, 'attempt', p_attempt, 'kind', 'compensating',
              'value', jsonb_build_object('compensations', jsonb_array_length(p_compensations))))
            ELSE '[]'::jsonb END
$$;

-- Checkpoints a run has committed, counted against max_transitions_per_run.
ALTER TABLE {schema}.runs ADD COLUMN transitions bigint NOT NULL DEFAULT 0;

-- Retention deletes history, which nobody but the owner may: the worker
-- calls this. One bounded batch of finished runs older than
-- p_older_than_hours, with their history and waits; SKIP LOCKED keeps
-- concurrent cleaners apart. A run whose compensation failed still owes its
-- other compensations: it stays until an operator retries it.
CREATE FUNCTION {schema}.delete_finished_runs(
  p_older_than_hours bigint, p_batch integer,
  OUT runs bigint, OUT events bigint, OUT waits bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
BEGIN
  IF p_older_than_hours IS NULL OR p_older_than_hours < 0 OR p_batch IS NULL OR p_batch < 1 THEN
    RAISE EXCEPTION 'retention needs an age of at least 0 hours and a batch of at least 1, got % and %',
      p_older_than_hours, p_batch USING ERRCODE = 'invalid_parameter_value';
  END IF;
  WITH doomed AS (
    SELECT r.id FROM {schema}.runs r
    WHERE r.finished_at < now() - p_older_than_hours * interval '1 hour'
      AND r.status <> 'compensation_failed'
    ORDER BY r.finished_at LIMIT p_batch FOR UPDATE SKIP LOCKED
  ), deleted_events AS (
    DELETE FROM {schema}.run_events e USING doomed d WHERE e.run_id = d.id RETURNING 1
  ), deleted_waits AS (
    DELETE FROM {schema}.wait_records w USING doomed d WHERE w.run_id = d.id RETURNING 1
  ), deleted_runs AS (
    DELETE FROM {schema}.runs r USING doomed d WHERE r.id = d.id RETURNING 1
  )
  SELECT (SELECT count(*) FROM deleted_runs), (SELECT count(*) FROM deleted_events),
         (SELECT count(*) FROM deleted_waits)
  INTO runs, events, waits;
END $$;

-- Starts a run of the newest registered definition of p_workflow (or of
-- p_version). Returns the run id; with a key, the existing run's id. The
-- input and key are checked against their caps.
CREATE OR REPLACE FUNCTION {schema}.start_run(
  p_workflow text, p_input jsonb DEFAULT '{}'::jsonb, p_key text DEFAULT NULL,
  p_queue text DEFAULT NULL, p_priority integer DEFAULT 0, p_run_at timestamptz DEFAULT NULL,
  p_namespace text DEFAULT 'default', p_version integer DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
DECLARE
  d {schema}.workflow_definitions;
  result record;
BEGIN
  IF p_input IS NOT NULL AND jsonb_typeof(p_input) <> 'object' THEN
    RAISE EXCEPTION 'run input must be a JSON object, got %', jsonb_typeof(p_input)
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
  SELECT * INTO result FROM {schema}.create_run(
    p_namespace, p_workflow, d.version, d.hash, p_key,
    coalesce(p_queue, d.definition->>'queue', 'default'), coalesce(p_priority, 0),
    p_input, '{}'::jsonb, d.first_step, p_run_at, NULL);
  RETURN (result.run).id;
END $$;

-- The delivery itself, without the caps: the path signals between runs and
-- from finished children take. signal() checks, then delivers through it.
ALTER FUNCTION {schema}.signal(text, jsonb, interval) RENAME TO deliver_signal;

-- Delivers a signal. Returns 'delivered' (the run will resume at the wait's
-- continuation step with the payload in its context), 'already_delivered'
-- (a duplicate: nothing changed), 'expired', 'cancelled', or 'stored' (no
-- wait with this key yet: kept in the inbox for p_inbox_retention, at most
-- max_inbox_retention_seconds).
CREATE FUNCTION {schema}.signal(
  p_key text, p_payload jsonb DEFAULT '{}'::jsonb,
  p_inbox_retention interval DEFAULT interval '1 day')
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
DECLARE
  longest bigint := {schema}.limit_of('max_inbox_retention_seconds');
BEGIN
  IF p_key IS NULL THEN
    RAISE EXCEPTION 'the correlation key is empty' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM {schema}.check_key('the correlation key', p_key);
  PERFORM {schema}.check_size('max_signal_payload_bytes', 'the signal''s payload',
                              {schema}.json_bytes(p_payload));
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

-- As in version 5, but a finished child reports through deliver_signal: the
-- children's summaries are cairn's own message, not a caller's payload.
CREATE OR REPLACE FUNCTION {schema}.report_to_parent() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  mode text;
  pending integer;
  summaries jsonb;
BEGIN
  PERFORM {schema}.lock_wait_key(NEW.parent_wait_key);
  IF NEW.finished_at IS NULL THEN
    -- cairn retry of a finished child: it is pending again.
    UPDATE {schema}.wait_records w SET children_pending = w.children_pending + 1
    WHERE w.correlation_key = NEW.parent_wait_key AND w.status = 'WAITING';
    RETURN NULL;
  END IF;
  UPDATE {schema}.wait_records w SET children_pending = w.children_pending - 1
  WHERE w.correlation_key = NEW.parent_wait_key AND w.status = 'WAITING'
  RETURNING w.children, w.children_pending INTO mode, pending;
  IF NOT FOUND THEN
    RETURN NULL;  -- resumed by an earlier child, expired or cancelled
  END IF;
  IF mode = 'all' THEN
    IF pending > 0 THEN
      RETURN NULL;
    END IF;
    SELECT jsonb_agg({schema}.child_summary(c) ORDER BY e.position) INTO summaries
    FROM {schema}.runs c
    JOIN {schema}.run_events e ON e.run_id = c.parent_run_id AND e.kind = 'child_started'
                              AND e.value->>'id' = c.id::text
    WHERE c.parent_run_id = NEW.parent_run_id AND c.parent_wait_key = NEW.parent_wait_key;
  ELSE
    summaries := jsonb_build_array({schema}.child_summary(NEW));
  END IF;
  PERFORM {schema}.deliver_signal(NEW.parent_wait_key, summaries, interval '1 day');
  RETURN NULL;
END $$;

-- The rest of the SQL API an application calls runs as the owner too.
ALTER FUNCTION {schema}.cancel_run(uuid, text)
  SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp;
ALTER FUNCTION {schema}.retry_run(uuid)
  SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp;

-- The roles, their ownership and their grants. Creating a role needs
-- CREATEROLE: a migrator without it finds them created by an administrator
-- (the error says how), or the migration stops here and changes nothing.
DO $roles$
DECLARE
  owner_role text := {schema}.role_name('owner');
  worker_role text := {schema}.role_name('worker');
  app_role text := {schema}.role_name('app');
  may_create boolean;
  missing text[];
  missing_role text;
  object record;
BEGIN
  SELECT r.rolsuper OR r.rolcreaterole INTO may_create FROM pg_roles r WHERE r.rolname = current_user;
  SELECT array_agg(n ORDER BY o) INTO missing
  FROM unnest(ARRAY[owner_role, worker_role, app_role]) WITH ORDINALITY AS k(n, o)
  WHERE NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = k.n);
  IF missing IS NOT NULL AND NOT may_create THEN
    RAISE EXCEPTION 'schema % needs the roles %, which do not exist, and role % may not create them',
      '{schema_name}', array_to_string(missing, ', '), current_user
      USING ERRCODE = 'insufficient_privilege',
            HINT = format('migrate once as a role with CREATEROLE, or have an administrator run: '
                          'CREATE ROLE %I NOLOGIN; CREATE ROLE %I NOLOGIN; CREATE ROLE %I NOLOGIN; '
                          'GRANT %I TO %I;', owner_role, worker_role, app_role, owner_role,
                          current_user);
  END IF;
  FOREACH missing_role IN ARRAY coalesce(missing, '{}'::text[]) LOOP
    EXECUTE format('CREATE ROLE %I NOLOGIN', missing_role);
  END LOOP;
  IF NOT pg_has_role(current_user, owner_role, 'USAGE') THEN
    IF NOT may_create THEN
      RAISE EXCEPTION 'role % migrates schema % but is not a member of its owner role %',
        current_user, '{schema_name}', owner_role USING ERRCODE = 'insufficient_privilege',
        HINT = format('have an administrator run: GRANT %I TO %I;', owner_role, current_user);
    END IF;
    EXECUTE format('GRANT %I TO %I', owner_role, current_user);
  END IF;

  -- The owner owns every table (with its indexes and sequences) and
  -- function; the schema stays with the role that created it.
  EXECUTE format('GRANT USAGE, CREATE ON SCHEMA {schema} TO %I', owner_role);
  FOR object IN SELECT c.relname FROM pg_class c
                WHERE c.relnamespace = '{schema}'::regnamespace AND c.relkind IN ('r', 'p', 'v')
  LOOP
    EXECUTE format('ALTER TABLE {schema}.%I OWNER TO %I', object.relname, owner_role);
  END LOOP;
  FOR object IN SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS args
                FROM pg_proc p WHERE p.pronamespace = '{schema}'::regnamespace
  LOOP
    EXECUTE format('ALTER FUNCTION {schema}.%I(%s) OWNER TO %I', object.proname, object.args,
                   owner_role);
    -- Functions are the owner's and the worker's; the application gets the
    -- API below. Nobody else may call them.
    EXECUTE format('REVOKE ALL ON FUNCTION {schema}.%I(%s) FROM PUBLIC', object.proname,
                   object.args);
    EXECUTE format('GRANT EXECUTE ON FUNCTION {schema}.%I(%s) TO %I', object.proname,
                   object.args, worker_role);
  END LOOP;

  EXECUTE format('GRANT USAGE ON SCHEMA {schema} TO %I, %I', worker_role, app_role);
  -- The worker: claims, checkpoints, waits, signals, schedules, the
  -- idempotency store, registration. History is insert-only, runs are never
  -- deleted but through delete_finished_runs.
  EXECUTE format('GRANT SELECT, INSERT, UPDATE ON {schema}.runs, {schema}.schedules, '
                 '{schema}.workers, {schema}.workflow_definitions TO %I', worker_role);
  EXECUTE format('GRANT SELECT, INSERT ON {schema}.run_events TO %I', worker_role);
  EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON {schema}.wait_records, '
                 '{schema}.signal_inbox, {schema}.idempotency_keys TO %I', worker_role);
  EXECUTE format('GRANT SELECT ON {schema}.schema_migrations, {schema}.limits TO %I, %I',
                 worker_role, app_role);
  -- The application: the API, and reading runs, their waits and history.
  EXECUTE format('GRANT SELECT ON {schema}.runs, {schema}.run_events, {schema}.wait_records TO %I',
                 app_role);
  EXECUTE format('GRANT EXECUTE ON FUNCTION {schema}.start_run(text, jsonb, text, text, integer, '
                 'timestamptz, text, integer), {schema}.signal(text, jsonb, interval), '
                 '{schema}.cancel_run(uuid, text), {schema}.retry_run(uuid) TO %I', app_role);

  -- What later migrations create (they run as the owner) follows the same
  -- rules: tables the worker may change, functions nobody else may call.
  EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC',
                 owner_role);
  EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA {schema} '
                 'GRANT EXECUTE ON FUNCTIONS TO %I', owner_role, worker_role);
  EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA {schema} '
                 'GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %I', owner_role, worker_role);
  EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA {schema} '
                 'GRANT USAGE, SELECT ON SEQUENCES TO %I', owner_role, worker_role);
END $roles$;
