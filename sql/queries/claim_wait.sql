-- Compare-and-swap WAITING -> RESUMING: concurrent claimants queue on the row
-- lock and re-check the status, so exactly one wins.
UPDATE {schema}.wait_records SET status = 'RESUMING', claimant = $2,
       payload = coalesce($3::jsonb, payload), claimed_at = now()
WHERE correlation_key = $1 AND status = 'WAITING'
  AND ($4 OR expires_at IS NULL OR expires_at > now())
RETURNING *, (expires_at IS NOT NULL AND expires_at <= now()) AS expired
