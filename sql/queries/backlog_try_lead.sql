-- The backlog reader's lease: a session advisory lock on '<schema>:backlog'.
-- The one session of the fleet that holds it reads the backlog; another
-- daemon takes over when that session ends.
SELECT pg_try_advisory_lock(hashtextextended($1 || ':backlog', 0))
