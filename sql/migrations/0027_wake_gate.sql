-- Schema 27: a wake hint is sent only while a daemon waits for one.
--
-- A transaction that notifies takes one database-wide lock at commit and
-- holds it through its WAL flush, whether anyone listens or not: producers
-- that notify commit one at a time. Most hints are not needed. A daemon
-- whose slots are all busy, or that is draining a backlog, claims again as
-- soon as a slot is free, and finds the new runs then.
--
-- So a daemon with an idle slot opens the wake gate of each queue it serves:
-- its listener session takes a shared advisory lock on each of the queue's
-- stripes. A transaction that made a run due tries, as it commits, to take
-- one stripe exclusively. It notifies only if it cannot, because a daemon
-- holds the gate open. If it can, it holds the stripe through its commit.
-- Opening the gate therefore waits for every such commit to end. The daemon
-- claims after opening, so that claim sees every run that did not notify.
-- A daemon closes the gate on the first hint it gets, then opens it again
-- once it has claimed and still has an idle slot.
--
-- The check runs at commit, from a deferred trigger: a stripe taken when
-- the run is started would be held for the rest of a long transaction, and
-- the daemon opening the gate would wait for it. Two stripes are tried, so
-- that two producers committing at once rarely see each other as a daemon.
-- Adds one unlogged table, its trigger and four functions; replaces wake.

-- Rows exist only inside the transaction that woke: each is deleted by the
-- statement after its insert, and its trigger still fires at commit. No WAL.
CREATE UNLOGGED TABLE IF NOT EXISTS {schema}.wake_requests (queue text NOT NULL)
  WITH (autovacuum_vacuum_threshold = 10000, autovacuum_vacuum_scale_factor = 0);

-- The advisory lock key of a queue's gate; its stripes are the second key.
CREATE OR REPLACE FUNCTION {schema}.wake_gate_key(p_queue text) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT hashtext('{schema_name}:wake:' || p_queue) $$;

CREATE OR REPLACE FUNCTION {schema}.wake_gate_stripes() RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT 16 $$;

-- Opens the gates of p_queues on this session; blocks until the commits
-- that skipped their hint have ended. Session locks: a session that ends
-- closes its gates.
CREATE OR REPLACE FUNCTION {schema}.open_wake_gates(p_queues text[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_lock_shared({schema}.wake_gate_key(q.queue), s.stripe)
  FROM (SELECT DISTINCT queue FROM unnest(p_queues) AS queue) q,
       generate_series(0, {schema}.wake_gate_stripes() - 1) AS s(stripe)
  ORDER BY q.queue, s.stripe;
END $$;

-- Closes every gate this session opened. The listener's session holds no
-- other advisory lock.
CREATE OR REPLACE FUNCTION {schema}.close_wake_gates() RETURNS void
LANGUAGE sql AS $$ SELECT pg_advisory_unlock_all() $$;

-- SECURITY DEFINER: it fires at commit, as whoever commits, and an
-- application's role may not call the schema's other functions.
CREATE OR REPLACE FUNCTION {schema}.wake_at_commit() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
DECLARE
  gate integer := {schema}.wake_gate_key(NEW.queue);
  stripes integer := {schema}.wake_gate_stripes();
  pid integer := pg_backend_pid();
BEGIN
  IF pg_try_advisory_xact_lock(gate, pid % stripes) THEN
    RETURN NULL;
  END IF;
  IF pg_try_advisory_xact_lock(gate, (pid / stripes) % stripes) THEN
    RETURN NULL;
  END IF;
  PERFORM pg_notify({schema}.wake_channel(), NEW.queue);
  RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS wake_at_commit ON {schema}.wake_requests;
CREATE CONSTRAINT TRIGGER wake_at_commit AFTER INSERT ON {schema}.wake_requests
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {schema}.wake_at_commit();

-- As in schema 18, with the hint decided at commit.
CREATE OR REPLACE FUNCTION {schema}.wake(p_queue text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  hints text := coalesce(nullif(current_setting('cairn.wake_hints', true), ''), 'on');
  request tid;
BEGIN
  IF hints = 'on' THEN
    INSERT INTO {schema}.wake_requests (queue) VALUES (p_queue) RETURNING ctid INTO request;
    DELETE FROM {schema}.wake_requests WHERE ctid = request;
  ELSIF hints <> 'off' THEN
    RAISE EXCEPTION 'cairn.wake_hints is "%": set it to on or off', hints
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
END $$;
