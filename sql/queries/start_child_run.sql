SELECT {schema}.start_child_run($1::uuid, $2, $3, $4::jsonb, $5, $6)
