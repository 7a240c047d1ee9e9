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
-- checkpoint statement alone (pgbench, one session, generic plan) took
-- 0.45 to 0.47 ms before and 0.42 to 0.44 after, a claim of one run 0.47
-- to 0.51 and 0.41 to 0.49; a daemon of 8 slots drained noop3 at 2 989 to
-- 3 124 steps/s before and 3 224 to 3 396 after (three pairs).
--
-- The rules are those of the constraints they replace, with the same
-- meaning (a rule whose value is null holds, as in a CHECK), and a broken
-- one is reported as before: SQLSTATE 23514, PostgreSQL's message for a
-- CHECK constraint with the old constraint's name, which the error's
-- constraint field carries too, and a detail that says the rule.
-- A later migration that drops or renames a column of runs must update
-- {schema}.run_row_rules: a function's body is not a dependency.
-- Validating the new constraint reads every run once, under this
-- migration's lock of the table.

CREATE OR REPLACE FUNCTION {schema}.run_row_rules(r {schema}.runs) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  -- One expression, evaluated once: the first broken rule's constraint name
  -- and wording, or null.
  broken text[] := CASE
    WHEN (r.status IN ('ready', 'running', 'waiting', 'completed', 'failed', 'cancelled',
                       'compensating', 'compensation_failed')) IS FALSE
    THEN ARRAY['runs_status_check', 'status is one of ready, running, waiting, completed, '
                                    'failed, cancelled, compensating, compensation_failed']
    WHEN (r.namespace <> '') IS FALSE
    THEN ARRAY['runs_namespace_check', 'namespace is not empty']
    WHEN (r.workflow <> '') IS FALSE
    THEN ARRAY['runs_workflow_check', 'workflow is not empty']
    WHEN (r.queue <> '') IS FALSE
    THEN ARRAY['runs_queue_check', 'queue is not empty']
    WHEN (r.run_key IS NULL OR r.run_key <> '') IS FALSE
    THEN ARRAY['runs_key_check', 'run_key is null or not empty']
    WHEN (r.attempt >= 0) IS FALSE
    THEN ARRAY['runs_attempt_check', 'attempt is at least 0']
    WHEN (r.version >= 1) IS FALSE
    THEN ARRAY['runs_version_check', 'version is at least 1']
    WHEN (jsonb_typeof(r.context) = 'object') IS FALSE
    THEN ARRAY['runs_context_check', 'context is a JSON object']
    WHEN ((r.status = 'running') = (r.lease_owner IS NOT NULL AND r.lease_expires_at IS NOT NULL))
         IS FALSE
    THEN ARRAY['runs_lease_check', 'a run is running exactly when it has a lease owner and '
                                   'a lease expiry']
    WHEN ((r.status IN ('completed', 'failed', 'cancelled', 'compensation_failed'))
          = (r.finished_at IS NOT NULL)) IS FALSE
    THEN ARRAY['runs_finished_check', 'a run is completed, failed, cancelled or '
                                      'compensation_failed exactly when it has finished_at']
    WHEN (jsonb_typeof(r.compensations) = 'array') IS FALSE
    THEN ARRAY['runs_compensations_check', 'compensations is a JSON array']
    WHEN (r.final_status IN ('failed', 'cancelled')) IS FALSE
    THEN ARRAY['runs_final_status_check', 'final_status is null, failed or cancelled']
    WHEN (r.status NOT IN ('compensating', 'compensation_failed') OR r.final_status IS NOT NULL)
         IS FALSE
    THEN ARRAY['runs_compensating_check', 'a compensating or compensation_failed run has '
                                          'a final_status']
    WHEN (r.lease_expiries >= 0) IS FALSE
    THEN ARRAY['runs_lease_expiries_check', 'lease_expiries is at least 0']
    WHEN (r.key_scope IN ('forever', 'unfinished')) IS FALSE
    THEN ARRAY['runs_key_scope_check', 'key_scope is forever or unfinished']
  END;
BEGIN
  IF broken IS NOT NULL THEN
    RAISE EXCEPTION 'new row for relation "runs" violates check constraint "%"', broken[1]
      USING ERRCODE = 'check_violation', CONSTRAINT = broken[1], TABLE = 'runs',
            SCHEMA = '{schema_name}', DETAIL = 'The rule: ' || broken[2] || '. Run ' || r.id || '.';
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
  ADD CONSTRAINT runs_row_rules_check CHECK ({schema}.run_row_rules(runs));
