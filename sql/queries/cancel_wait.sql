UPDATE {schema}.wait_records SET status = 'CANCELLED', finished_at = now()
WHERE correlation_key = $1 AND status IN ('WAITING', 'RESUMING')
RETURNING correlation_key
