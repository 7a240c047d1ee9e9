-- Every registered definition, newest version first per workflow, with the
-- runs pinned to it: all of them, and those not finished yet (which need a
-- worker that serves this hash).
SELECT d.hash, d.workflow, d.version, d.first_step, d.registered_at::text AS registered_at,
       d.definition::text AS definition,
       coalesce(p.runs, 0) AS runs, coalesce(p.unfinished, 0) AS unfinished
FROM {schema}.workflow_definitions d
LEFT JOIN (
  SELECT definition_hash, count(*) AS runs,
         count(*) FILTER (WHERE status IN ('ready', 'running', 'waiting', 'compensating'))
           AS unfinished
  FROM {schema}.runs
  GROUP BY definition_hash
) p ON p.definition_hash = d.hash
ORDER BY d.workflow, d.version DESC, d.registered_at DESC
