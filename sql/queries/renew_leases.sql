-- Extends the leases this worker still holds; $2 is a JSON array of
-- {"id", "version"}. A run missing from the result was taken over.
UPDATE {schema}.runs r SET lease_expires_at = now() + $3 * interval '1 millisecond'
FROM jsonb_to_recordset($2::jsonb) AS h(id uuid, version bigint)
WHERE r.id = h.id AND r.version = h.version AND r.status = 'running' AND r.lease_owner = $1
RETURNING r.id
