-- Schema 27: wake hints only while a daemon waits for them, one at a time.
--
-- A transaction that notifies takes one database-wide lock at commit and
-- holds it through its WAL flush, whether anyone listens or not: producers
-- that notify commit one at a time. Most hints are not needed, and one
-- hint in flight stands for every run made due before it is read.
--
-- So a daemon with an idle slot opens the wake gate of each queue it serves:
-- its listener session takes a shared advisory lock on each of the gate's
-- stripes. A transaction that made a run due decides, as it commits (a
-- deferred trigger), between three things:
--   - the gate is closed (it takes a gate stripe exclusively): no hint. It
--     holds the stripe through its commit, and opening the gate waits for
--     it: the daemon claims after opening, and sees its run;
--   - the gate is open and no other commit is notifying (it takes the
--     notifier lock): it notifies;
--   - the gate is open and another commit is notifying: no hint. It holds
--     a waiter stripe through its commit, and a daemon reading a hint
--     waits for the waiter stripes before it claims, so it sees the run.
-- A daemon closes its gates at a hint that finds all its slots busy (it
-- claims as a slot frees), and opens them again, followed by a claim, once
-- it has an idle slot.
--
-- The decision is made at commit: a stripe taken when the run is started
-- would be held for the rest of a long transaction, and the daemon would
-- wait for it. Two stripes are tried, so that two producers committing at
-- once rarely take each other for a daemon; one that gets neither
-- notifies. Adds one unlogged table, its trigger and six functions;
-- replaces wake. A daemon of an earlier version opens no gate: once this
-- is applied it gets no hints, and finds runs at its polls, until it is
-- restarted on this version.

-- Rows exist only inside the transaction that woke: each is deleted by the
-- statement after its insert, and its trigger still fires at commit. No WAL.
CREATE UNLOGGED TABLE IF NOT EXISTS {schema}.wake_requests (queue text NOT NULL)
  WITH (autovacuum_vacuum_threshold = 10000, autovacuum_vacuum_scale_factor = 0);

-- The advisory lock key of a queue's gate. Its second keys: the gate's
-- stripes from 0, the waiter stripes after them, then the notifier lock.
CREATE OR REPLACE FUNCTION {schema}.wake_gate_key(p_queue text) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT hashtext('{schema_name}:wake:' || p_queue) $$;

CREATE OR REPLACE FUNCTION {schema}.wake_gate_stripes() RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT 32 $$;

-- Waits for the commits that left their hint to another's (their waiter
-- stripes), so that a claim made after it sees their runs. It tries each
-- stripe and lets go of it at once, then waits only for those it found
-- taken: a producer that finds its stripe locked here notifies, and new
-- producers keep taking stripes, which a wait on each in turn would wait
-- for too.
CREATE OR REPLACE FUNCTION {schema}.await_wake_waiters(p_queues text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  stripes integer := {schema}.wake_gate_stripes();
  gate integer;
  taken integer[];
  stripe integer;
BEGIN
  FOR gate IN SELECT DISTINCT {schema}.wake_gate_key(queue) FROM unnest(p_queues) AS queue LOOP
    taken := '{}';
    FOR stripe IN stripes .. 2 * stripes - 1 LOOP
      IF pg_try_advisory_lock_shared(gate, stripe) THEN
        PERFORM pg_advisory_unlock_shared(gate, stripe);
      ELSE
        taken := taken || stripe;
      END IF;
    END LOOP;
    FOREACH stripe IN ARRAY taken LOOP
      PERFORM pg_advisory_lock_shared(gate, stripe);
      PERFORM pg_advisory_unlock_shared(gate, stripe);
    END LOOP;
  END LOOP;
END $$;

-- Opens the gates of p_queues on this session; returns once the commits
-- that skipped their hint have ended. Session locks: a session that ends
-- closes its gates.
CREATE OR REPLACE FUNCTION {schema}.open_wake_gates(p_queues text[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_lock_shared({schema}.wake_gate_key(q.queue), s.stripe)
  FROM (SELECT DISTINCT queue FROM unnest(p_queues) AS queue) q,
       generate_series(0, {schema}.wake_gate_stripes() - 1) AS s(stripe)
  ORDER BY q.queue, s.stripe;
  PERFORM {schema}.await_wake_waiters(p_queues);
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
  mine integer := pg_backend_pid() % stripes;
  other integer := (pg_backend_pid() / stripes) % stripes;
BEGIN
  IF pg_try_advisory_xact_lock(gate, mine) OR pg_try_advisory_xact_lock(gate, other) THEN
    RETURN NULL;  -- closed
  END IF;
  IF (pg_try_advisory_xact_lock(gate, stripes + mine)
      OR pg_try_advisory_xact_lock(gate, stripes + other))
     AND NOT pg_try_advisory_xact_lock(gate, 2 * stripes) THEN
    RETURN NULL;  -- another commit is notifying
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
