-- Signal to resume, per resumed wait of a phase (runs tagged $1), in
-- milliseconds of database time: from the signal's commit (the wait's
-- claimed_at) to the commit of the first step after the wait (resumed_at).
SELECT extract(epoch FROM w.resumed_at - w.claimed_at)::float8 * 1000
FROM {schema}.wait_records w JOIN {schema}.runs r ON r.id = w.run_id
WHERE r.input @> $1::jsonb AND w.status = 'RESUMED'
