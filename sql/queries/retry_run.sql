SELECT * FROM {schema}.retry_run($1::uuid)
