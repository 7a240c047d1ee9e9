-- Finished waits of runs that are still alive.
DELETE FROM {schema}.wait_records
WHERE correlation_key IN (
  SELECT correlation_key FROM {schema}.wait_records
  WHERE finished_at < now() - $1 * interval '1 hour'
  ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED)
RETURNING 1
