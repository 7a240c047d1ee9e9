-- A checkpoint before each measured phase: one that the server would start
-- on its own (checkpoint_timeout, max_wal_size) during a phase of a few
-- seconds writes its dirty pages while the phase runs, and the first change
-- of every page after it puts a whole page (a full-page image) into the WAL
-- that the phase's WAL per step then counts. Taken before the phase's runs
-- are started, so that none of their pages predates it.
CHECKPOINT
