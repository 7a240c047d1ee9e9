-- Claims up to $3 due runs of the worker's queues whose definition it has
-- loaded (ready ones, and failed or cancelled ones whose compensations are
-- due). MATERIALIZED keeps the LIMIT honest (a plain IN (subquery) can
-- claim more than asked). The version bump fences any earlier holder.
WITH due AS MATERIALIZED (
  SELECT id FROM {schema}.runs
  WHERE status IN ('ready', 'compensating') AND queue = ANY($1::text[]) AND run_at <= now()
    AND definition_hash = ANY($2::text[])
  ORDER BY priority DESC, run_at, id
  LIMIT $3
  FOR UPDATE SKIP LOCKED)
UPDATE {schema}.runs r
SET status = 'running', lease_owner = $4, lease_expires_at = now() + $5 * interval '1 millisecond',
    version = r.version + 1, updated_at = now()
FROM due WHERE r.id = due.id
RETURNING r.*
