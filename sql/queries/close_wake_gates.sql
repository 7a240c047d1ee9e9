-- Closes the wake gates the listener's session opened (migration 27).
SELECT {schema}.close_wake_gates()
