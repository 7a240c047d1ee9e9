SELECT *, expires_at <= now() AS expired FROM {schema}.idempotency_keys WHERE key = $1
