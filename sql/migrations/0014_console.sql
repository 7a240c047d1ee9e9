-- Indexes for the console's runs page (cairn console): newest first, by
-- status or by queue, with keyset pagination over (created_at, id). Without
-- them a filter on a rare status reads every run backwards until it has a
-- page. Building them reads the runs table once (a few seconds per million
-- runs) and blocks writes to it meanwhile: migrate in a quiet moment.
CREATE INDEX IF NOT EXISTS runs_status_created_idx ON {schema}.runs (status, created_at, id);
CREATE INDEX IF NOT EXISTS runs_queue_created_idx ON {schema}.runs (queue, created_at, id);
