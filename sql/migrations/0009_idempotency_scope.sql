-- Schema 9: the idempotency store, scoped and callable. Keys belong to a
-- namespace (a plugin's keys to its run's namespace), a failed claim is kept
-- as 'failed' (claimable again) instead of vanishing, and the store's
-- operations are SQL functions: the worker calls the same ones an
-- application calls in its own transaction. Runs as <schema>_owner.
-- Rewrites nothing large: idempotency_keys gains columns with constant
-- defaults and a new primary key over the (few) keys it holds.

ALTER TABLE {schema}.idempotency_keys
  ADD COLUMN namespace text NOT NULL DEFAULT 'default',
  ADD COLUMN error text,
  ADD COLUMN claims integer NOT NULL DEFAULT 1,
  ADD COLUMN claimed_at timestamptz NOT NULL DEFAULT now(),
  DROP CONSTRAINT idempotency_keys_pkey,
  ADD PRIMARY KEY (namespace, key),
  DROP CONSTRAINT idempotency_keys_status_check,
  ADD CONSTRAINT idempotency_keys_status_check
    CHECK (status IN ('in_progress', 'completed', 'failed')),
  ADD CONSTRAINT idempotency_keys_namespace_check CHECK (namespace <> '');

INSERT INTO {schema}.limits (name, value, description) VALUES
  ('max_idempotency_result_bytes', 1048576, 'the result stored with a completed idempotency key')
ON CONFLICT (name) DO NOTHING;

-- What the idempotency functions return: the key's state as the caller sees
-- it. status is 'claimed' (the caller holds the key now), 'in_progress'
-- (another owner holds it until expires_at), 'completed' (result is the
-- stored result) or, from idempotency_get only, the record's own status.
-- in_doubt: this claim took over a claim that never completed or failed (its
-- owner may have made the effect before it died); error: the failure of the
-- claim this one replaced, or of a failed record.
CREATE TYPE {schema}.idempotency_state AS (
  namespace text, key text, status text, owner text, result jsonb, error text,
  in_doubt boolean, claims integer, expires_at timestamptz, created_at timestamptz,
  claimed_at timestamptz, completed_at timestamptz, expired boolean);

CREATE FUNCTION {schema}.idempotency_check_args(p_namespace text, p_key text, p_owner text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  PERFORM {schema}.check_key('the idempotency namespace', coalesce(p_namespace, ''));
  PERFORM {schema}.check_key('the idempotency key', coalesce(p_key, ''));
  IF p_owner IS NOT NULL THEN
    PERFORM {schema}.check_key('the idempotency owner', p_owner);
  END IF;
END $$;

-- Claims p_key in p_namespace for p_owner until now() + p_lease. A key that
-- is new, failed, expired, or held in progress by p_owner itself is claimed
-- (in_doubt when it was in progress: p_owner's earlier attempt, or an owner
-- whose claim expired, may have made its effect). A completed key returns
-- its result; one held by another owner returns 'in_progress' with its
-- expiry. Concurrent claims of one key resolve to exactly one owner: the row
-- lock orders them, and a key inserted concurrently is read back locked.
CREATE FUNCTION {schema}.idempotency_claim(
  p_key text, p_owner text, p_lease interval, p_namespace text DEFAULT 'default')
RETURNS {schema}.idempotency_state
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
DECLARE
  k {schema}.idempotency_keys;
  doubt boolean;
  previous_error text;
BEGIN
  IF p_owner IS NULL THEN
    RAISE EXCEPTION 'the idempotency owner is missing' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF p_lease IS NULL THEN
    RAISE EXCEPTION 'the idempotency lease is missing' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM {schema}.idempotency_check_args(p_namespace, p_key, p_owner);
  -- Two rounds: a key someone else inserts between our read and our insert
  -- is read again, locked. Under REPEATABLE READ the second read cannot see
  -- it either: that transaction must retry.
  FOR pass IN 1..2 LOOP
    SELECT * INTO k FROM {schema}.idempotency_keys
    WHERE namespace = p_namespace AND key = p_key FOR UPDATE;
    IF NOT FOUND THEN
      INSERT INTO {schema}.idempotency_keys AS i (namespace, key, status, owner, expires_at)
      VALUES (p_namespace, p_key, 'in_progress', p_owner, now() + p_lease)
      ON CONFLICT (namespace, key) DO NOTHING
      RETURNING * INTO k;
      IF FOUND THEN
        RETURN {schema}.idempotency_state_of(k, 'claimed', false, NULL);
      END IF;
      CONTINUE;
    END IF;
    IF k.expires_at > now() AND k.status = 'completed' THEN
      RETURN {schema}.idempotency_state_of(k, 'completed', false, NULL);
    END IF;
    IF k.expires_at > now() AND k.status = 'in_progress' AND k.owner IS DISTINCT FROM p_owner THEN
      RETURN {schema}.idempotency_state_of(k, 'in_progress', false, NULL);
    END IF;
    doubt := k.status = 'in_progress';
    previous_error := CASE WHEN k.status = 'failed' THEN k.error END;
    UPDATE {schema}.idempotency_keys
    SET status = 'in_progress', owner = p_owner, result = NULL, error = NULL,
        completed_at = NULL, expires_at = now() + p_lease, claimed_at = now(),
        claims = claims + 1
    WHERE namespace = p_namespace AND key = p_key
    RETURNING * INTO k;
    RETURN {schema}.idempotency_state_of(k, 'claimed', doubt, previous_error);
  END LOOP;
  RAISE EXCEPTION 'idempotency key % in namespace % changed during the claim; retry the transaction',
    p_key, p_namespace USING ERRCODE = 'serialization_failure';
END $$;

-- A record as the functions return it.
CREATE FUNCTION {schema}.idempotency_state_of(
  k {schema}.idempotency_keys, p_status text, p_in_doubt boolean, p_error text)
RETURNS {schema}.idempotency_state
LANGUAGE sql STABLE AS $$
  SELECT ROW(k.namespace, k.key, p_status, k.owner, k.result, coalesce(p_error, k.error),
             p_in_doubt, k.claims, k.expires_at, k.created_at, k.claimed_at, k.completed_at,
             k.expires_at <= now())::{schema}.idempotency_state
$$;

-- Stores p_result for a key p_owner holds in progress, kept until now() +
-- p_ttl. False when p_owner does not hold it (it was never claimed, it
-- expired and another owner took it, or it is already completed or failed).
CREATE FUNCTION {schema}.idempotency_complete(
  p_key text, p_owner text, p_result jsonb, p_ttl interval, p_namespace text DEFAULT 'default')
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
BEGIN
  IF p_ttl IS NULL THEN
    RAISE EXCEPTION 'the idempotency ttl is missing' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM {schema}.idempotency_check_args(p_namespace, p_key, coalesce(p_owner, ''));
  PERFORM {schema}.check_size('max_idempotency_result_bytes', 'the idempotency result',
                              {schema}.json_bytes(coalesce(p_result, 'null'::jsonb)));
  UPDATE {schema}.idempotency_keys
  SET status = 'completed', result = coalesce(p_result, 'null'::jsonb), completed_at = now(),
      expires_at = now() + p_ttl
  WHERE namespace = p_namespace AND key = p_key AND owner = p_owner AND status = 'in_progress';
  RETURN FOUND;
END $$;

-- Marks a key p_owner holds in progress failed, with p_error: the effect did
-- not happen, and the next claim (by anyone) takes the key at once. False
-- when p_owner does not hold it.
CREATE FUNCTION {schema}.idempotency_fail(
  p_key text, p_owner text, p_error text DEFAULT NULL, p_namespace text DEFAULT 'default')
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
BEGIN
  PERFORM {schema}.idempotency_check_args(p_namespace, p_key, coalesce(p_owner, ''));
  UPDATE {schema}.idempotency_keys
  SET status = 'failed', error = coalesce(left(p_error, 4096), 'failed')
  WHERE namespace = p_namespace AND key = p_key AND owner = p_owner AND status = 'in_progress';
  RETURN FOUND;
END $$;

-- A key's record (status in_progress, completed or failed; expired by
-- database time), or no row.
CREATE FUNCTION {schema}.idempotency_get(p_key text, p_namespace text DEFAULT 'default')
RETURNS SETOF {schema}.idempotency_state
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, {schema}, pg_temp AS $$
BEGIN
  PERFORM {schema}.idempotency_check_args(p_namespace, p_key, NULL);
  RETURN QUERY
    SELECT ({schema}.idempotency_state_of(k, k.status, false, NULL)).*
    FROM {schema}.idempotency_keys k WHERE k.namespace = p_namespace AND k.key = p_key;
END $$;

-- The application may call the idempotency functions; the helpers stay the
-- owner's and the worker's.
DO $grants$
BEGIN
  EXECUTE format('GRANT USAGE ON TYPE {schema}.idempotency_state TO %I',
                 {schema}.role_name('app'));
  EXECUTE format('GRANT EXECUTE ON FUNCTION {schema}.idempotency_claim(text, text, interval, text), '
                 '{schema}.idempotency_complete(text, text, jsonb, interval, text), '
                 '{schema}.idempotency_fail(text, text, text, text), '
                 '{schema}.idempotency_get(text, text) TO %I', {schema}.role_name('app'));
END $grants$;
