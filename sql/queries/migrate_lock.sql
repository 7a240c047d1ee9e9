-- Serialises concurrent `cairn migrate` runs on one schema (session lock).
SELECT pg_advisory_lock(hashtextextended($1 || ':migrate', 0))
