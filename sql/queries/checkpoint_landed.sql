-- The WITH clause of a step's checkpoint statement, which save_checkpoint.sql
-- and save_checkpoint_and_claim.sql include (cmake/GenerateSql.cmake): the
-- OCC write of a step and its audit events ($13, a JSON array), in one
-- statement so that a step without other writes commits in one round trip.
-- Its last clause, landed, is the checkpoint's row (no row when the version
-- was stale).
-- $2 is the version the writer read; a stale one matches no row and writes
-- no event. A cancelled run keeps its status, lease-free and finished,
-- whatever the checkpoint asks for. $14 is the compensation stack, $15 the
-- status the run ends in once it has unwound (null going forward). Due times
-- and the lease count from statement_timestamp(), not now(): a transactional
-- step's transaction may have started long before this statement. A commit
-- ends any streak of expired leases.
-- $16, when not null, is the schema of the stack lock key (stack_try_lock):
-- a checkpoint that lands then releases this session's stack lock of the
-- run too, so that a slot whose run parks needs no round trip of its own
-- for it. Safe before the commit: the updated row stays locked until then,
-- so no claim, signal or cancel can touch the run in between. Late in the
-- select list, after what is likeliest to fail; only for autocommit, since
-- a rolled-back transaction would not take it back.
-- Limits: a checkpoint carrying the run forward with a context or output over
-- max_context_bytes is refused (SQLSTATE 54000); one that fails, cancels or
-- unwinds the run always lands, so a refused run can record its failure. One
-- past max_transitions_per_run lands but ends the run instead (failed with
-- code history_limit, unwinding first when it has compensations, its waits
-- cancelled). Likewise one that carries the run forward at or after its
-- deadline (deadline_at, by statement_timestamp()) lands, so the step that
-- ran is undone by its compensation like any committed step, but ends the
-- run: failed with code deadline_exceeded, even a step that completed it.
-- Plain expressions, not functions: this is the hot path. Each limit is one
-- read by primary key: PostgreSQL sets up the whole plan at every execution,
-- and an aggregate over a scan of both rows cost more to set up (a carrying
-- checkpoint, rolled back: 236 against 222 µs of server CPU, medians of ten
-- alternating rounds of 3 000).
WITH caps AS MATERIALIZED (
  SELECT (SELECT l.value FROM {schema}.limits l WHERE l.name = 'max_context_bytes')
           AS context_bytes,
         (SELECT l.value FROM {schema}.limits l WHERE l.name = 'max_transitions_per_run')
           AS transitions
), checked AS MATERIALIZED (
  -- Columns of their own, always evaluated: in an AND the planner could skip
  -- the check.
  SELECT r.id,
         CASE WHEN $15::text IS NOT NULL OR $5 IN ('failed', 'cancelled', 'compensation_failed')
              THEN false
              WHEN octet_length($3::text) > k.context_bytes
              THEN {schema}.limit_exceeded('max_context_bytes', 'the run''s context',
                                           octet_length($3::text))
              WHEN octet_length($11::text) > k.context_bytes
              THEN {schema}.limit_exceeded('max_context_bytes', 'the run''s output',
                                           octet_length($11::text))
              ELSE true END AS forward,
         r.status = 'cancelled' AS cancelled,
         (r.transitions >= k.transitions) IS TRUE AS at_limit,
         (r.deadline_at <= statement_timestamp()) IS TRUE AS past_deadline
  FROM {schema}.runs r, caps k
  WHERE r.id = $1::uuid AND r.version = $2
), current AS (
  SELECT c.id, o.code IS NOT NULL AS over, o.code
  FROM checked c,
       LATERAL (SELECT CASE WHEN NOT c.forward OR c.cancelled THEN NULL
                            WHEN c.past_deadline THEN 'deadline_exceeded'
                            WHEN c.at_limit AND $5 <> 'completed' THEN 'history_limit'
                       END AS code) o
), updated AS (
UPDATE {schema}.runs r SET
  context = $3::text::jsonb,
  cursor = $4,
  status = CASE WHEN r.status = 'cancelled' THEN 'cancelled'
                WHEN c.over THEN {schema}.ending_status('failed', $14::jsonb)
                ELSE $5 END,
  attempt = CASE WHEN c.over AND {schema}.unwinds($14::jsonb) THEN 0 ELSE $6 END,
  run_at = CASE WHEN r.status = 'cancelled' THEN r.run_at
                WHEN c.over THEN statement_timestamp()
                WHEN $5 IN ('ready', 'compensating')
                THEN coalesce($7::timestamptz, statement_timestamp() + $8 * interval '1 millisecond')
                ELSE r.run_at END,
  lease_owner = CASE WHEN r.status <> 'cancelled' AND NOT c.over AND $5 = 'running'
                     THEN coalesce($9, r.lease_owner) END,
  lease_expires_at = CASE WHEN r.status <> 'cancelled' AND NOT c.over AND $5 = 'running'
                          THEN statement_timestamp() + $10 * interval '1 millisecond' END,
  output = CASE WHEN c.over THEN r.output ELSE coalesce($11::text::jsonb, r.output) END,
  error = CASE WHEN c.code = 'deadline_exceeded' THEN {schema}.deadline_error(r.deadline_at)
               WHEN c.over THEN {schema}.history_limit_error(r.transitions)
               ELSE $12 END,
  compensations = $14::jsonb,
  final_status = CASE WHEN NOT c.over THEN $15
                      WHEN {schema}.unwinds($14::jsonb) THEN 'failed' END,
  transitions = r.transitions + 1,
  lease_expiries = 0,
  version = r.version + 1,
  updated_at = now(),
  finished_at = CASE WHEN r.status = 'cancelled' THEN r.finished_at
                     WHEN c.over THEN CASE WHEN NOT {schema}.unwinds($14::jsonb) THEN now() END
                     WHEN $5 IN ('completed', 'failed', 'cancelled', 'compensation_failed')
                     THEN now() END
FROM current c
WHERE r.id = c.id AND r.version = $2
RETURNING r.version, r.status, c.over, c.code, r.error
), stopped_waits AS (
  UPDATE {schema}.wait_records w SET status = 'CANCELLED', finished_at = now()
  FROM updated u
  WHERE u.over AND w.run_id = $1::uuid AND w.status IN ('WAITING', 'RESUMING')
), landed AS MATERIALIZED (
  SELECT u.version AS checkpoint_version, u.status AS checkpoint_status,
         {schema}.append_events(CASE WHEN u.over
           THEN $13::jsonb || {schema}.failure_events($1::uuid, $4, $6, u.code, u.error, $14::jsonb)
           ELSE $13::jsonb END) AS events_written,
         u.code AS ended_with,
         CASE WHEN $16::text IS NOT NULL
              THEN pg_advisory_unlock(hashtextextended($16::text || ':stack:' || $1::uuid::text, 0))
         END AS stack_released
  FROM updated u
)
