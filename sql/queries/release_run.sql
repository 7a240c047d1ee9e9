-- Hands a run back without consuming an attempt (shutdown, stack lock held
-- elsewhere): due again after $4 ms, fenced by the version bump.
UPDATE {schema}.runs r
SET status = {schema}.due_status(r.final_status), run_at = now() + $4 * interval '1 millisecond', lease_owner = NULL,
    lease_expires_at = NULL, version = r.version + 1, updated_at = now()
WHERE r.id = $1::uuid AND r.version = $2 AND r.status = 'running' AND r.lease_owner = $3
RETURNING r.version
