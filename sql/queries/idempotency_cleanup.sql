-- Retention: one batch of expired idempotency keys, whatever their status.
DELETE FROM {schema}.idempotency_keys
WHERE (namespace, key) IN (SELECT namespace, key FROM {schema}.idempotency_keys
                           WHERE expires_at <= now()
                           ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
RETURNING key
