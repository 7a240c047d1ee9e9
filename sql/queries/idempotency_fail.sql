-- Marks a key its owner holds failed (claimable again); false when it does not.
SELECT {schema}.idempotency_fail($1, $2, $3, $4)
