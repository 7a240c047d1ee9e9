-- Waits for the commits of queues $1 that left their hint to another's
-- (migration 27), before a claim on a hint.
SELECT {schema}.await_wake_waiters($1::text[])
