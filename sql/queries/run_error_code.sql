-- The code of the failure that gave a run its status: the newest 'failed'
-- event of a failed run, the newest 'compensation_failed' event of a
-- compensation_failed run. No row for a run in any other status, or one
-- whose event carries no code.
SELECT e.value->>'code' AS code
FROM {schema}.runs r
JOIN {schema}.run_events e ON e.run_id = r.id AND e.kind = r.status
WHERE r.id = $1::uuid
  AND r.status IN ('failed', 'compensation_failed')
  AND e.value->>'code' IS NOT NULL
ORDER BY e.position DESC
LIMIT 1
