SELECT * FROM {schema}.run_events
WHERE run_id = $1::uuid AND position > $2
ORDER BY position
LIMIT $3
