-- Extends the leases this worker still holds; $2 is a JSON array of
-- {"id", "version"}. One row per asked run: 'renewed'; 'busy' when another
-- session holds the row's lock (say, an operator's SELECT ... FOR UPDATE):
-- it is skipped, not waited for, so one locked row never holds up the
-- others, and it is not lost either; or 'lost' when the run moved on under
-- another owner or version (taken over: its holder must stop).
WITH asked AS (
  SELECT * FROM jsonb_to_recordset($2::jsonb) AS h(id uuid, version bigint)
), locked AS MATERIALIZED (
  SELECT r.id FROM {schema}.runs r JOIN asked a ON r.id = a.id AND r.version = a.version
  WHERE r.status = 'running' AND r.lease_owner = $1
  FOR UPDATE OF r SKIP LOCKED
), renewed AS (
  UPDATE {schema}.runs r SET lease_expires_at = now() + $3 * interval '1 millisecond'
  FROM locked WHERE r.id = locked.id
  RETURNING r.id
)
SELECT a.id,
       CASE WHEN n.id IS NOT NULL THEN 'renewed'
            WHEN r.version = a.version AND r.status = 'running' AND r.lease_owner = $1
            THEN 'busy'
            ELSE 'lost' END AS outcome
FROM asked a
LEFT JOIN renewed n ON n.id = a.id
LEFT JOIN {schema}.runs r ON r.id = a.id
