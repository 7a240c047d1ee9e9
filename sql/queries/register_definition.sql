INSERT INTO {schema}.workflow_definitions (hash, workflow, version, first_step, definition)
VALUES ($1, $2, $3, $4, $5::jsonb)
ON CONFLICT (hash) DO UPDATE SET registered_at = now()
