-- Unfinished runs pinned to a definition that no live worker serves: they
-- would wait for ever. Listed by `cairn list --stranded` and counted.
SELECT r.* FROM {schema}.runs r
WHERE r.status IN ('ready', 'waiting', 'compensating')
  AND NOT EXISTS (
    SELECT 1 FROM {schema}.workers w
    WHERE w.stopped_at IS NULL AND w.heartbeat_at > now() - $1 * interval '1 millisecond'
      AND r.definition_hash = ANY(w.served_definitions) AND r.queue = ANY(w.queues))
ORDER BY r.created_at, r.id
LIMIT $2
