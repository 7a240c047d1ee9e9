-- Claims a new key, or takes over one whose claim or cached result expired.
-- No row back: someone else holds it (read its state with idempotency_get).
INSERT INTO {schema}.idempotency_keys AS k (key, status, owner, expires_at)
VALUES ($1, 'in_progress', $2, now() + $3 * interval '1 millisecond')
ON CONFLICT (key) DO UPDATE
  SET status = 'in_progress', owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at,
      result = NULL, completed_at = NULL, created_at = now()
  WHERE k.expires_at <= now()
RETURNING key
