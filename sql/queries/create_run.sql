SELECT (c.run).*, c.created
FROM {schema}.create_run($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9::jsonb, $10,
                         $11::timestamptz, $12::uuid, $13::timestamptz, $14) c
