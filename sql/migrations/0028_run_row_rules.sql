-- Schema 28: the rules of a run's row are checked by one function, not
-- fifteen CHECK constraints.
--
-- PostgreSQL reads a table's CHECK constraints back from their stored text
-- and plans them again at every statement that writes the table: it keeps
-- no compiled copy between statements. Every checkpoint and every claim
-- updates a run, so that was paid at every step: the fifteen expressions
-- of runs are 10.7 kB of node text, and reading and planning them took 12%
-- of the server's CPU while a daemon of 8 slots drained noop3 runs. One
-- constraint that calls a PL/pgSQL function costs one small expression per
-- statement; the function's own expression is compiled once per
-- transaction. Measured alternating the two, on one database: a carrying
-- checkpoint statement (pgbench, one session, generic plan, rolled back)
-- took 0.45 to 0.47 ms before and 0.42 to 0.44 after; a daemon of 8 slots
-- drained noop3 at 2 787 to 2 827 steps/s before and 2 946 to 3 036 after
-- (three pairs). A statement of many rows pays instead: a function call a
-- row, about 1 µs; a bulk start of 1 000 runs took 17.3 to 17.7 ms before
-- and 18.2 to 18.5 after.
--
-- The rules are those of the constraints they replace, with the same
-- meaning (a rule whose value is null holds, as in a CHECK), and a broken
-- one is reported as before: SQLSTATE 23514, PostgreSQL's message for a
-- CHECK constraint with the old constraint's name, which the error's
-- constraint field carries too, and a detail that says the rule.
-- When several rules are broken, the one named is the first by name, as
-- PostgreSQL checks a table's constraints in the order of their names.
-- The function takes the columns its rules read, not the whole row: a
-- whole-row value would fetch every out-of-line (TOASTed) column at every
-- write, a run's input and output included. Validating the new constraint
-- reads every run once, under this migration's lock of the table.

CREATE OR REPLACE FUNCTION {schema}.run_row_rules(
  p_id uuid, p_status text, p_namespace text, p_workflow text, p_queue text, p_run_key text,
  p_attempt integer, p_version bigint, p_context jsonb, p_lease_owner text,
  p_lease_expires_at timestamptz, p_finished_at timestamptz, p_compensations jsonb,
  p_final_status text, p_lease_expiries integer, p_key_scope text)
RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  -- One expression, evaluated once: the first broken rule's constraint name
  -- and wording, or null.
  broken text[] := CASE
    WHEN (p_attempt >= 0) IS FALSE
    THEN ARRAY['runs_attempt_check', 'attempt is at least 0']
    WHEN (p_status NOT IN ('compensating', 'compensation_failed') OR p_final_status IS NOT NULL)
         IS FALSE
    THEN ARRAY['runs_compensating_check', 'a compensating or compensation_failed run has '
                                          'a final_status']
    WHEN (jsonb_typeof(p_compensations) = 'array') IS FALSE
    THEN ARRAY['runs_compensations_check', 'compensations is a JSON array']
    WHEN (jsonb_typeof(p_context) = 'object') IS FALSE
    THEN ARRAY['runs_context_check', 'context is a JSON object']
    WHEN (p_final_status IN ('failed', 'cancelled')) IS FALSE
    THEN ARRAY['runs_final_status_check', 'final_status is null, failed or cancelled']
    WHEN ((p_status IN ('completed', 'failed', 'cancelled', 'compensation_failed'))
          = (p_finished_at IS NOT NULL)) IS FALSE
    THEN ARRAY['runs_finished_check', 'a run is completed, failed, cancelled or '
                                      'compensation_failed exactly when it has finished_at']
    WHEN (p_run_key IS NULL OR p_run_key <> '') IS FALSE
    THEN ARRAY['runs_key_check', 'run_key is null or not empty']
    WHEN (p_key_scope IN ('forever', 'unfinished')) IS FALSE
    THEN ARRAY['runs_key_scope_check', 'key_scope is forever or unfinished']
    WHEN ((p_status = 'running') = (p_lease_owner IS NOT NULL AND p_lease_expires_at IS NOT NULL))
         IS FALSE
    THEN ARRAY['runs_lease_check', 'a run is running exactly when it has a lease owner and '
                                   'a lease expiry']
    WHEN (p_lease_expiries >= 0) IS FALSE
    THEN ARRAY['runs_lease_expiries_check', 'lease_expiries is at least 0']
    WHEN (p_namespace <> '') IS FALSE
    THEN ARRAY['runs_namespace_check', 'namespace is not empty']
    WHEN (p_queue <> '') IS FALSE
    THEN ARRAY['runs_queue_check', 'queue is not empty']
    WHEN (p_status IN ('ready', 'running', 'waiting', 'completed', 'failed', 'cancelled',
                       'compensating', 'compensation_failed')) IS FALSE
    THEN ARRAY['runs_status_check', 'status is one of ready, running, waiting, completed, '
                                    'failed, cancelled, compensating, compensation_failed']
    WHEN (p_version >= 1) IS FALSE
    THEN ARRAY['runs_version_check', 'version is at least 1']
    WHEN (p_workflow <> '') IS FALSE
    THEN ARRAY['runs_workflow_check', 'workflow is not empty']
  END;
BEGIN
  IF broken IS NOT NULL THEN
    RAISE EXCEPTION 'new row for relation "runs" violates check constraint "%"', broken[1]
      USING ERRCODE = 'check_violation', CONSTRAINT = broken[1], TABLE = 'runs',
            SCHEMA = '{schema_name}', DETAIL = 'The rule: ' || broken[2] || '. Run ' || p_id || '.';
  END IF;
  RETURN true;
END $$;

ALTER TABLE {schema}.runs
  DROP CONSTRAINT IF EXISTS runs_status_check,
  DROP CONSTRAINT IF EXISTS runs_namespace_check,
  DROP CONSTRAINT IF EXISTS runs_workflow_check,
  DROP CONSTRAINT IF EXISTS runs_queue_check,
  DROP CONSTRAINT IF EXISTS runs_key_check,
  DROP CONSTRAINT IF EXISTS runs_attempt_check,
  DROP CONSTRAINT IF EXISTS runs_version_check,
  DROP CONSTRAINT IF EXISTS runs_context_check,
  DROP CONSTRAINT IF EXISTS runs_lease_check,
  DROP CONSTRAINT IF EXISTS runs_finished_check,
  DROP CONSTRAINT IF EXISTS runs_compensations_check,
  DROP CONSTRAINT IF EXISTS runs_final_status_check,
  DROP CONSTRAINT IF EXISTS runs_compensating_check,
  DROP CONSTRAINT IF EXISTS runs_lease_expiries_check,
  DROP CONSTRAINT IF EXISTS runs_key_scope_check,
  DROP CONSTRAINT IF EXISTS runs_row_rules_check,
  ADD CONSTRAINT runs_row_rules_check CHECK ({schema}.run_row_rules(
    id, status, namespace, workflow, queue, run_key, attempt, version, context, lease_owner,
    lease_expires_at, finished_at, compensations, final_status, lease_expiries, key_scope));
