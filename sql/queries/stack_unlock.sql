-- Releases this session's stack locks of runs $2 (an array; the key of
-- stack_try_lock) in one round trip.
SELECT pg_advisory_unlock(hashtextextended($1 || ':stack:' || run_id, 0))
FROM unnest($2::text[]) AS run_id
