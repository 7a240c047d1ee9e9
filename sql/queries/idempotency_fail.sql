DELETE FROM {schema}.idempotency_keys
WHERE key = $1 AND owner = $2 AND status = 'in_progress'
RETURNING key
