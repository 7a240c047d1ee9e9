UPDATE {schema}.idempotency_keys SET status = 'completed', result = $3::jsonb,
       completed_at = now(), expires_at = now() + $4 * interval '1 millisecond'
WHERE key = $1 AND owner = $2 AND status = 'in_progress'
RETURNING key
