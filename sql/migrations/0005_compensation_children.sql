-- cairn schema, version 5: compensation of failed and cancelled runs, and
-- child runs a step starts and waits for.

-- compensations: the steps with a compensation that committed, in commit
-- order; unwinding pops from the end. final_status: set while (and after) a
-- run's compensations run, the status it ends in once they are done.
-- parent_wait_key: for a child run, the parent's wait it reports to when it
-- finishes (null for a child the parent does not wait for). It outlives the
-- parent, which retention may delete first (parent_run_id becomes null).
ALTER TABLE {schema}.runs
  ADD COLUMN compensations jsonb NOT NULL DEFAULT '[]'::jsonb,
  ADD COLUMN final_status text,
  ADD COLUMN parent_wait_key text,
  ADD CONSTRAINT runs_compensations_check CHECK (jsonb_typeof(compensations) = 'array'),
  ADD CONSTRAINT runs_final_status_check CHECK (final_status IN ('failed', 'cancelled')),
  ADD CONSTRAINT runs_compensating_check CHECK (
    status NOT IN ('compensating', 'compensation_failed') OR final_status IS NOT NULL);

-- A run whose compensations are due is claimed like a ready one.
DROP INDEX {schema}.runs_due_idx;
CREATE INDEX runs_due_idx ON {schema}.runs (queue, priority DESC, run_at, id)
  WHERE status IN ('ready', 'compensating');

-- A wait for child runs: 'all' resumes when every child of the wait has
-- finished, 'first' when one has. Null for a wait for a signal.
-- children_pending counts its children that have not finished: a counter on
-- one row, so siblings finishing at once serialise on it whatever the
-- callers' isolation level.
ALTER TABLE {schema}.wait_records
  ADD COLUMN children text,
  ADD COLUMN children_pending integer NOT NULL DEFAULT 0,
  ADD CONSTRAINT wait_records_children_check CHECK (children IN ('all', 'first')),
  ADD CONSTRAINT wait_records_children_pending_check CHECK (children_pending >= 0);

-- The claimable status of a run that is handed back or due again: ready,
-- or compensating once it unwinds.
CREATE FUNCTION {schema}.due_status(p_final_status text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_final_status IS NULL THEN 'ready' ELSE 'compensating' END
$$;

-- Whether a run that ends now (failed or cancelled) unwinds first: steps
-- with a compensation committed.
CREATE FUNCTION {schema}.unwinds(p_compensations jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_array_length(p_compensations) > 0
$$;

-- The status of a run that ends with `p_status` (failed or cancelled).
CREATE FUNCTION {schema}.ending_status(p_status text, p_compensations jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN {schema}.unwinds(p_compensations) THEN 'compensating' ELSE p_status END
$$;

DROP FUNCTION {schema}.create_wait(text, uuid, text, text, text, bigint);
-- Creates a wait record (p_children: null for a signal, 'all' or 'first' for
-- child runs). When a signal for its key is already in the inbox, the wait is
-- claimed with that payload at once and the result is true: the caller
-- continues the run instead of parking it.
CREATE FUNCTION {schema}.create_wait(
  p_key text, p_run_id uuid, p_event text, p_continuation_step text, p_timeout_step text,
  p_timeout_ms bigint, p_children text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  early jsonb;
BEGIN
  PERFORM {schema}.lock_wait_key(p_key);
  INSERT INTO {schema}.wait_records (correlation_key, run_id, event, continuation_step,
                                     timeout_step, expires_at, children)
  VALUES (p_key, p_run_id, p_event, p_continuation_step, p_timeout_step,
          now() + p_timeout_ms * interval '1 millisecond', p_children);
  DELETE FROM {schema}.signal_inbox
  WHERE correlation_key = p_key AND expires_at > now()
  RETURNING payload INTO early;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  UPDATE {schema}.wait_records
  SET status = 'RESUMING', claimant = 'signal', payload = early, claimed_at = now()
  WHERE correlation_key = p_key;
  RETURN true;
END $$;

-- Starts a child run of p_parent_run_id: a run like any other (start_run:
-- newest definition of p_workflow, in the parent's namespace) that names its
-- parent. With p_parent_wait_key, the child reports to that wait of the
-- parent when it finishes. Called in the parent step's commit.
CREATE FUNCTION {schema}.start_child_run(
  p_parent_run_id uuid, p_parent_wait_key text, p_workflow text, p_input jsonb)
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
  parent_namespace text;
  child uuid;
BEGIN
  SELECT r.namespace INTO parent_namespace FROM {schema}.runs r WHERE r.id = p_parent_run_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'parent run % does not exist', p_parent_run_id USING ERRCODE = 'no_data_found';
  END IF;
  child := {schema}.start_run(p_workflow, p_input, p_namespace => parent_namespace);
  UPDATE {schema}.runs SET parent_run_id = p_parent_run_id, parent_wait_key = p_parent_wait_key
  WHERE id = child;
  IF p_parent_wait_key IS NOT NULL THEN
    UPDATE {schema}.wait_records SET children_pending = children_pending + 1
    WHERE correlation_key = p_parent_wait_key AND run_id = p_parent_run_id
      AND children IS NOT NULL;
    IF NOT FOUND THEN
      RAISE EXCEPTION 'run % has no wait for children with key %', p_parent_run_id,
        p_parent_wait_key USING ERRCODE = 'no_data_found';
    END IF;
  END IF;
  RETURN child;
END $$;

-- What a parent receives about a finished child.
CREATE FUNCTION {schema}.child_summary(c {schema}.runs) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object('id', c.id, 'workflow', c.workflow, 'status', c.status,
                            'output', c.output, 'error', c.error)
$$;

-- A child finished: when its parent's wait is satisfied (the first child
-- for 'first', the last one for 'all'), signal it with the children's
-- summaries; a finished child that is retried counts as pending again.
-- Siblings finishing at once queue on the wait's counter row, so exactly one
-- of them counts the last child down (at REPEATABLE READ or SERIALIZABLE
-- the later one fails with a serialisation error and is retried, never
-- missed).
CREATE FUNCTION {schema}.report_to_parent() RETURNS trigger
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
    -- In start order: siblings share created_at (one transaction started
    -- them), the parent's child_started events are in order.
    SELECT jsonb_agg({schema}.child_summary(c) ORDER BY e.position) INTO summaries
    FROM {schema}.runs c
    JOIN {schema}.run_events e ON e.run_id = c.parent_run_id AND e.kind = 'child_started'
                              AND e.value->>'id' = c.id::text
    WHERE c.parent_run_id = NEW.parent_run_id AND c.parent_wait_key = NEW.parent_wait_key;
  ELSE
    summaries := jsonb_build_array({schema}.child_summary(NEW));
  END IF;
  PERFORM {schema}.signal(NEW.parent_wait_key, summaries);
  RETURN NULL;
END $$;

CREATE TRIGGER runs_report_to_parent
  AFTER UPDATE OF finished_at ON {schema}.runs
  FOR EACH ROW
  WHEN (NEW.parent_wait_key IS NOT NULL AND (OLD.finished_at IS NULL) <> (NEW.finished_at IS NULL))
  EXECUTE FUNCTION {schema}.report_to_parent();

-- Cancels a run and its live waits atomically, and then its unfinished
-- children. A run with committed compensations unwinds first (status
-- compensating, ends cancelled). outcome: 'cancelled', 'already_finished' or
-- 'compensating' (its compensations already run: nothing changed), 'unknown'.
CREATE OR REPLACE FUNCTION {schema}.cancel_run(
  p_run_id uuid, p_reason text DEFAULT 'cancelled',
  OUT outcome text, OUT run_status text, OUT run_version bigint, OUT waits_cancelled integer)
LANGUAGE plpgsql AS $$
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
    PERFORM pg_notify({schema}.wake_channel(), current.queue);
  END IF;
  FOR child IN SELECT c.id FROM {schema}.runs c
               WHERE c.parent_run_id = p_run_id AND c.finished_at IS NULL
               ORDER BY c.created_at, c.id LOOP
    PERFORM {schema}.cancel_run(child, 'parent run ' || p_run_id || ' was cancelled');
  END LOOP;
  outcome := 'cancelled';
END $$;

-- Restarts a failed run at the step that failed, with its checkpoint intact
-- and a fresh attempt budget, or a run whose compensation failed at that
-- compensation. outcome: 'retried', 'not_failed' (nothing changed; run_status
-- says why), 'compensated' (its steps were undone: start a new run instead;
-- nothing changed) or 'unknown'.
CREATE OR REPLACE FUNCTION {schema}.retry_run(
  p_run_id uuid, OUT outcome text, OUT run_status text)
LANGUAGE plpgsql AS $$
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
  PERFORM pg_notify({schema}.wake_channel(), current.queue);
  outcome := 'retried';
END $$;
