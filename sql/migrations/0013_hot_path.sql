-- Schema 13: a cheaper hot path. A step that carries its run forward and a
-- lease renewal change no indexed column, so PostgreSQL can write them as
-- HOT updates (a new row version on the same page, no index entry at all).
-- Run ids are time-ordered, so new runs fill the primary key at its right
-- edge instead of dirtying a random leaf page each.
-- Builds one unique index over the runs with a key (a pass over the table,
-- which blocks writes to runs while it lasts), drops three indexes, changes
-- a column default and adds a function: rewrites nothing.

-- Every checkpoint and every renewal moves lease_expires_at, so an index on
-- it made every one of them a non-HOT update with a new entry in each index
-- of runs. The reaper reads runs_running_idx (migration 12) instead: it
-- holds the running runs alone, one per busy slot of the fleet, and the
-- reaper filters their expiries.
DROP INDEX IF EXISTS {schema}.runs_lease_idx;

-- One run ever per forever key, as in migration 10, over the runs that have
-- a key only: the old index held every run without a key too (their null
-- keys never conflict), an entry for each at each start, claim and end.
CREATE UNIQUE INDEX IF NOT EXISTS runs_forever_key_idx
  ON {schema}.runs (namespace, workflow, run_key) WHERE key_scope = 'forever' AND run_key IS NOT NULL;
DROP INDEX IF EXISTS {schema}.runs_key_forever_idx;

-- No query reads history by time alone (history pages by run and position,
-- retention deletes by run), and every event paid an entry here.
DROP INDEX IF EXISTS {schema}.run_events_created_idx;

-- A version 7 UUID (RFC 9562): 48 bits of Unix time in milliseconds, then
-- random bits. Ids stay unique and unguessable, and increase with time.
CREATE OR REPLACE FUNCTION {schema}.time_ordered_uuid() RETURNS uuid
LANGUAGE sql VOLATILE AS $$
  SELECT encode(set_byte(overlay(r PLACING substring(int8send(
                             floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                           FROM 1 FOR 6),
                         6, (get_byte(r, 6) & 15) | 112), 'hex')::uuid
  FROM uuid_send(gen_random_uuid()) AS r
$$;

ALTER TABLE {schema}.runs ALTER COLUMN id SET DEFAULT {schema}.time_ordered_uuid();

