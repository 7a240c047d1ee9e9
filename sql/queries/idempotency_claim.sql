-- Claims a key for an owner (see idempotency_claim in migration 9): the
-- caller holds it now, or it is completed, or another owner holds it.
SELECT * FROM {schema}.idempotency_claim($1, $2, $3 * interval '1 millisecond', $4)
