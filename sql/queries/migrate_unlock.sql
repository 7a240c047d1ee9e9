SELECT pg_advisory_unlock(hashtextextended($1 || ':migrate', 0))
