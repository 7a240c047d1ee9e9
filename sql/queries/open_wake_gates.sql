-- Opens the wake gates of queues $1 on the listener's session (migration 27).
SELECT {schema}.open_wake_gates($1::text[])
