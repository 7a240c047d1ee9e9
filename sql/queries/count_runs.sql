SELECT status, count(*) FROM {schema}.runs GROUP BY status
