-- The OCC write of a step and its audit events ($13, a JSON array), in one
-- statement so that a step without other writes commits in one round trip.
-- $2 is the version the writer read; a stale one matches no row and writes
-- no event. A cancelled run keeps its status, lease-free and finished,
-- whatever the checkpoint asks for. $14 is the compensation stack, $15 the
-- status the run ends in once it has unwound (null going forward). Due times
-- and the lease count from statement_timestamp(), not now(): a transactional
-- step's transaction may have started long before this statement. A commit
-- ends any streak of expired leases.
WITH updated AS (
UPDATE {schema}.runs r SET
  context = $3::jsonb,
  cursor = $4,
  status = CASE WHEN r.status = 'cancelled' THEN 'cancelled' ELSE $5 END,
  attempt = $6,
  run_at = CASE WHEN r.status <> 'cancelled' AND $5 IN ('ready', 'compensating')
                THEN coalesce($7::timestamptz, statement_timestamp() + $8 * interval '1 millisecond')
                ELSE r.run_at END,
  lease_owner = CASE WHEN r.status <> 'cancelled' AND $5 = 'running'
                     THEN coalesce($9, r.lease_owner) END,
  lease_expires_at = CASE WHEN r.status <> 'cancelled' AND $5 = 'running'
                          THEN statement_timestamp() + $10 * interval '1 millisecond' END,
  output = coalesce($11::jsonb, r.output),
  error = $12,
  compensations = $14::jsonb,
  final_status = $15,
  lease_expiries = 0,
  version = r.version + 1,
  updated_at = now(),
  finished_at = CASE WHEN r.status = 'cancelled' THEN r.finished_at
                     WHEN $5 IN ('completed', 'failed', 'cancelled', 'compensation_failed')
                     THEN now() END
WHERE r.id = $1::uuid AND r.version = $2
RETURNING r.version, r.status
)
SELECT u.version, u.status, {schema}.append_events($13::jsonb) FROM updated u
