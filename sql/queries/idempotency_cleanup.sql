DELETE FROM {schema}.idempotency_keys
WHERE key IN (SELECT key FROM {schema}.idempotency_keys WHERE expires_at <= now()
              ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
RETURNING key
