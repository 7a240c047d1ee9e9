-- The stack lock key: '<schema>:stack:<run id>', hashed to 64 bits.
SELECT pg_try_advisory_lock(hashtextextended($1 || ':stack:' || $2, 0))
