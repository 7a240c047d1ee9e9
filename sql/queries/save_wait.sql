INSERT INTO {schema}.wait_records (correlation_key, run_id, event, continuation_step,
                                   timeout_step, expires_at)
VALUES ($1, $2::uuid, $3, $4, $5, now() + $6 * interval '1 millisecond')
RETURNING *, (expires_at IS NOT NULL AND expires_at <= now()) AS expired
