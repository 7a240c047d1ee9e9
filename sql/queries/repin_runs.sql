-- Moves unfinished runs of a workflow from one definition to another (an
-- operator's decision after a deploy changed the definition).
UPDATE {schema}.runs r
SET definition_version = d.version, definition_hash = d.hash, version = r.version + 1,
    updated_at = now()
FROM {schema}.workflow_definitions d
WHERE d.hash = $2 AND r.workflow = d.workflow AND r.definition_hash = $1
  AND r.status IN ('ready', 'waiting', 'compensating')
RETURNING r.id
