-- cairn schema, version 4: signals (with an inbox for signals that arrive
-- before their wait), and cancel and retry as SQL functions, so that an
-- application can signal, cancel or retry a run inside its own transaction.

-- Signals whose wait does not exist yet. Consumed when the wait is created.
CREATE TABLE {schema}.signal_inbox (
  correlation_key text PRIMARY KEY,
  payload         jsonb NOT NULL DEFAULT '{}'::jsonb,
  created_at      timestamptz NOT NULL DEFAULT now(),
  expires_at      timestamptz NOT NULL,
  CONSTRAINT signal_inbox_key_check CHECK (correlation_key <> '')
);
CREATE INDEX signal_inbox_expiry_idx ON {schema}.signal_inbox (expires_at);

-- Serialises everything that concerns one correlation key (a wait being
-- created, a signal arriving) for the rest of the transaction, so a signal
-- and the wait it is meant for can never miss each other.
CREATE FUNCTION {schema}.lock_wait_key(p_key text) RETURNS void
LANGUAGE sql AS $$
  SELECT pg_advisory_xact_lock(hashtextextended('{schema_name}:wait:' || p_key, 0))
$$;

-- Creates a wait record. When a signal for its key is already in the inbox,
-- the wait is claimed with that payload at once and the result is true: the
-- caller continues the run instead of parking it.
CREATE FUNCTION {schema}.create_wait(
  p_key text, p_run_id uuid, p_event text, p_continuation_step text, p_timeout_step text,
  p_timeout_ms bigint)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  early jsonb;
BEGIN
  PERFORM {schema}.lock_wait_key(p_key);
  INSERT INTO {schema}.wait_records (correlation_key, run_id, event, continuation_step,
                                     timeout_step, expires_at)
  VALUES (p_key, p_run_id, p_event, p_continuation_step, p_timeout_step,
          now() + p_timeout_ms * interval '1 millisecond');
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

-- Delivers a signal. Returns 'delivered' (the run will resume at the wait's
-- continuation step with the payload in its context), 'already_delivered'
-- (a duplicate: nothing changed), 'expired', 'cancelled', or 'stored' (no
-- wait with this key yet: kept in the inbox for p_inbox_retention).
CREATE FUNCTION {schema}.signal(
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
      PERFORM pg_notify({schema}.wake_channel(), r.queue);
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

-- Cancels a run and its live waits atomically. outcome: 'cancelled',
-- 'already_finished' (nothing changed) or 'unknown'.
CREATE FUNCTION {schema}.cancel_run(
  p_run_id uuid, p_reason text DEFAULT 'cancelled',
  OUT outcome text, OUT run_status text, OUT run_version bigint, OUT waits_cancelled integer)
LANGUAGE plpgsql AS $$
DECLARE
  current record;
BEGIN
  waits_cancelled := 0;
  -- Its own statement: the ones after it see whatever a checkpoint we queued
  -- behind committed (its wait records included).
  SELECT r.status, r.version INTO current FROM {schema}.runs r WHERE r.id = p_run_id FOR UPDATE;
  IF NOT FOUND THEN
    outcome := 'unknown';
    RETURN;
  END IF;
  IF current.status IN ('completed', 'failed', 'cancelled', 'compensation_failed') THEN
    outcome := 'already_finished';
    run_status := current.status;
    run_version := current.version;
    RETURN;
  END IF;
  UPDATE {schema}.runs r
  SET status = 'cancelled', cancel_reason = p_reason, lease_owner = NULL, lease_expires_at = NULL,
      version = r.version + 1, updated_at = now(), finished_at = now()
  WHERE r.id = p_run_id
  RETURNING r.version INTO run_version;
  UPDATE {schema}.wait_records w SET status = 'CANCELLED', finished_at = now()
  WHERE w.run_id = p_run_id AND w.status IN ('WAITING', 'RESUMING');
  GET DIAGNOSTICS waits_cancelled = ROW_COUNT;
  INSERT INTO {schema}.run_events (run_id, kind, value)
  VALUES (p_run_id, 'cancelled', jsonb_build_object('reason', p_reason));
  outcome := 'cancelled';
  run_status := 'cancelled';
END $$;

-- Restarts a failed run at the step that failed, with its checkpoint intact
-- and a fresh attempt budget. outcome: 'retried', 'not_failed' (nothing
-- changed; run_status says why) or 'unknown'.
CREATE FUNCTION {schema}.retry_run(
  p_run_id uuid, OUT outcome text, OUT run_status text)
LANGUAGE plpgsql AS $$
DECLARE
  current record;
BEGIN
  SELECT r.status, r.queue, r.cursor INTO current
  FROM {schema}.runs r WHERE r.id = p_run_id FOR UPDATE;
  IF NOT FOUND THEN
    outcome := 'unknown';
    RETURN;
  END IF;
  IF current.status <> 'failed' THEN
    outcome := 'not_failed';
    run_status := current.status;
    RETURN;
  END IF;
  UPDATE {schema}.runs r
  SET status = 'ready', attempt = 0, run_at = now(), finished_at = NULL,
      version = r.version + 1, updated_at = now()
  WHERE r.id = p_run_id;
  INSERT INTO {schema}.run_events (run_id, step, kind) VALUES (p_run_id, current.cursor, 'retry_requested');
  PERFORM pg_notify({schema}.wake_channel(), current.queue);
  outcome := 'retried';
  run_status := 'ready';
END $$;
