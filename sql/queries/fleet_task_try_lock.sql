-- The lock of a fleet-wide task: '<schema>:task:<name>', hashed to 64 bits.
SELECT pg_try_advisory_lock(hashtextextended($1 || ':task:' || $2, 0))
