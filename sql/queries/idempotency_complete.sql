-- Stores the result of a key its owner holds; false when it does not.
SELECT {schema}.idempotency_complete($1, $2, $3::jsonb, $4 * interval '1 millisecond', $5)
