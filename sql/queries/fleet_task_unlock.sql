SELECT pg_advisory_unlock(hashtextextended($1 || ':task:' || $2, 0))
