-- The pgbench ceiling of one cairn step (a pgbench script, not a store
-- query): claim the next due run with SKIP LOCKED, write its checkpoint
-- (context, cursor, status, version bump; finished after three steps) and
-- one audit event, as one statement, so one transaction per step. It reads
-- the same partial index as cairn's claim, in the queue cairn_bench_pgbench
-- that `cairn bench` fills beforehand.
WITH due AS MATERIALIZED (
  SELECT id FROM {schema}.runs
  WHERE status = 'ready' AND queue = 'cairn_bench_pgbench' AND run_at <= now()
  ORDER BY priority DESC, run_at, id
  LIMIT 1
  FOR UPDATE SKIP LOCKED
), stepped AS (
  UPDATE {schema}.runs r
  SET context = r.context || jsonb_build_object('step', r.transitions + 1),
      cursor = 's' || (r.transitions + 2),
      status = CASE WHEN r.transitions + 1 >= 3 THEN 'completed' ELSE 'ready' END,
      finished_at = CASE WHEN r.transitions + 1 >= 3 THEN now() END,
      transitions = r.transitions + 1,
      version = r.version + 1,
      updated_at = now()
  FROM due WHERE r.id = due.id
  RETURNING r.id, r.transitions
)
INSERT INTO {schema}.run_events (run_id, step, attempt, kind)
SELECT id, 's' || transitions, 1, 'step_committed' FROM stepped;
