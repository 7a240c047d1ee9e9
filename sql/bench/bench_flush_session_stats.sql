-- This session's statistics reach pg_stat_database when the transaction
-- ends, not up to a second later: a reading of the counters in the next
-- transaction then counts everything this session did.
SELECT pg_stat_force_next_flush()
