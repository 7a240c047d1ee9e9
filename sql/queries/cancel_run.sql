SELECT * FROM {schema}.cancel_run($1::uuid, $2)
