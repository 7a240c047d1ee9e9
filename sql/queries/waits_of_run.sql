SELECT *, (expires_at IS NOT NULL AND expires_at <= now()) AS expired
FROM {schema}.wait_records WHERE run_id = $1::uuid
ORDER BY created_at, correlation_key
