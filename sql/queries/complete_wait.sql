UPDATE {schema}.wait_records SET status = 'RESUMED', resumed_at = now(), finished_at = now()
WHERE correlation_key = $1 AND status = 'RESUMING' AND claimant = $2
RETURNING *, (expires_at IS NOT NULL AND expires_at <= now()) AS expired
