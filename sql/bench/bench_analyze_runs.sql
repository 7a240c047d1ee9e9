-- Fresh planner statistics after a fill, as autovacuum would give them a
-- little later: the claim is timed against the plan production would use.
ANALYZE {schema}.runs
