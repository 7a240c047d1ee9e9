SELECT pg_advisory_unlock(hashtextextended($1 || ':stack:' || $2, 0))
