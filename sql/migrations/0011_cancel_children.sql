-- Schema 11: a child run may ask, when it is started, to be cancelled along
-- with its parent: when the parent fails (cancel_when_parent_fails), and when
-- the parent's wait for the first of its children is satisfied by another
-- child (cancel_when_first_done). Cancelling a parent cancels every unfinished
-- child, as before. Adding columns with a constant default rewrites nothing.

ALTER TABLE {schema}.runs
  ADD COLUMN IF NOT EXISTS cancel_when_parent_fails boolean NOT NULL DEFAULT false,
  ADD COLUMN IF NOT EXISTS cancel_when_first_done boolean NOT NULL DEFAULT false;

-- As in version 5, with the child's options.
DROP FUNCTION {schema}.start_child_run(uuid, text, text, jsonb);
CREATE FUNCTION {schema}.start_child_run(
  p_parent_run_id uuid, p_parent_wait_key text, p_workflow text, p_input jsonb,
  p_cancel_when_parent_fails boolean DEFAULT false,
  p_cancel_when_first_done boolean DEFAULT false)
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
  UPDATE {schema}.runs
  SET parent_run_id = p_parent_run_id, parent_wait_key = p_parent_wait_key,
      cancel_when_parent_fails = coalesce(p_cancel_when_parent_fails, false),
      cancel_when_first_done = coalesce(p_cancel_when_first_done, false)
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

-- Cancels the unfinished children of p_parent_run_id that asked for it,
-- oldest first (siblings one step started, in no set order): p_because 'parent_failed' cancels those with
-- cancel_when_parent_fails, 'first_done' those of the parent's wait
-- p_wait_key with cancel_when_first_done. Each goes through cancel_run with
-- p_reason, so its own unfinished children go with it and it unwinds its
-- compensations as any cancelled run does. The parent's history says which
-- it cancelled (a 'children_cancelled' event). Returns how many.
CREATE FUNCTION {schema}.cancel_children_that_asked(
  p_parent_run_id uuid, p_because text, p_reason text, p_wait_key text DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  child uuid;
  cancelled jsonb := '[]'::jsonb;
BEGIN
  IF p_because NOT IN ('parent_failed', 'first_done') THEN
    RAISE EXCEPTION 'cancel_children_that_asked: unknown cause %', p_because
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  FOR child IN SELECT c.id FROM {schema}.runs c
               WHERE c.parent_run_id = p_parent_run_id AND c.finished_at IS NULL
                 AND CASE WHEN p_because = 'parent_failed' THEN c.cancel_when_parent_fails
                          ELSE c.cancel_when_first_done AND c.parent_wait_key = p_wait_key END
               ORDER BY c.created_at, c.id LOOP
    IF (SELECT x.outcome FROM {schema}.cancel_run(child, p_reason) x) = 'cancelled' THEN
      cancelled := cancelled || to_jsonb(child::text);
    END IF;
  END LOOP;
  IF jsonb_array_length(cancelled) > 0 THEN
    INSERT INTO {schema}.run_events (run_id, step, attempt, kind, value)
    SELECT r.id, r.cursor, r.attempt, 'children_cancelled',
           jsonb_build_object('because', p_because, 'ids', cancelled)
    FROM {schema}.runs r WHERE r.id = p_parent_run_id;
  END IF;
  RETURN jsonb_array_length(cancelled);
END $$;

-- A run failed: the children that asked are cancelled in the transaction
-- that failed it. A trigger, because runs fail in several statements
-- (save_checkpoint, reap_leases, expire_deadlines, expire_waits), some
-- committed alone, and each changes the parent and closes its waits in
-- data-modifying CTEs whose effects a function called inside the same
-- statement could not rely on; an AFTER trigger runs once they are all done.
-- A run "fails" when it starts to: it ends failed, or unwinds first
-- (compensating, final_status failed); finishing that unwinding, or a
-- compensation that fails, is no new failure. A run that fails again after
-- `cairn retry` cancels again the children that asked since.
CREATE FUNCTION {schema}.cancel_children_of_failed_run() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM {schema}.cancel_children_that_asked(NEW.id, 'parent_failed',
                                              'parent run ' || NEW.id || ' failed');
  RETURN NULL;
END $$;

CREATE TRIGGER runs_cancel_children_of_failed_run
  AFTER UPDATE OF status, final_status ON {schema}.runs
  FOR EACH ROW
  WHEN (coalesce(NEW.final_status, NEW.status) = 'failed'
        AND coalesce(OLD.final_status, OLD.status) <> 'failed')
  EXECUTE FUNCTION {schema}.cancel_children_of_failed_run();

-- A wait for the first of a run's children resumed it (the parent's commit
-- marked it RESUMED): the other children of that wait that asked are
-- cancelled, in that commit. Not in the child's commit that satisfies the
-- wait: that one holds the wait's key lock, which a sibling finishing at the
-- same moment takes after its own row, so cancelling the sibling there would
-- deadlock with it. Exactly one commit marks a wait RESUMED. Returns how many
-- children it cancelled (0 for any other wait).
CREATE FUNCTION {schema}.cancel_children_outrun(p_wait_key text) RETURNS integer
LANGUAGE sql AS $$
  SELECT coalesce(max({schema}.cancel_children_that_asked(
           w.run_id, 'first_done',
           'child run ' || coalesce(w.payload->0->>'id', '?') || ' of parent run ' || w.run_id
             || ' finished first',
           w.correlation_key)), 0)
  FROM {schema}.wait_records w
  WHERE w.correlation_key = p_wait_key AND w.children = 'first' AND w.status = 'RESUMED'
$$;
