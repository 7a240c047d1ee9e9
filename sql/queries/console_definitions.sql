-- Every registered definition, newest version first per workflow, with the
-- runs still pinned to it: those not finished (or awaiting a retry of their
-- compensation), which need a worker that serves this hash. They are found
-- through runs_status_created_idx and runs_running_idx (migration 20), one
-- arm of the OR each, so the page does not read the finished runs, the bulk
-- of the table.
SELECT d.hash, d.workflow, d.version, d.first_step, d.registered_at::text AS registered_at,
       d.definition::text AS definition, coalesce(p.runs, 0) AS pinned
FROM {schema}.workflow_definitions d
LEFT JOIN (
  SELECT definition_hash, count(*) AS runs
  FROM {schema}.runs
  WHERE status IN ('ready', 'waiting', 'compensating', 'compensation_failed') OR status = 'running'
  GROUP BY definition_hash
) p ON p.definition_hash = d.hash
ORDER BY d.workflow, d.version DESC, d.registered_at DESC
