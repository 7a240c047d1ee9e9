-- The garbage of the phases before, cleared before the next one: an
-- autovacuum that started during a phase on the rows of earlier ones would
-- charge it with that work, and, after the checkpoint that the phase starts
-- with (bench_checkpoint.sql), with a full-page image of every page it
-- visited. The vacuum of the phase's own rows, when autovacuum comes to
-- them during it, stays the phase's.
VACUUM {schema}.runs, {schema}.run_events, {schema}.wait_records, {schema}.workers
