SELECT *, (expires_at IS NOT NULL AND expires_at <= now()) AS expired
FROM {schema}.wait_records WHERE correlation_key = $1
