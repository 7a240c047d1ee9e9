-- A key's record, or no row.
SELECT * FROM {schema}.idempotency_get($1, $2)
