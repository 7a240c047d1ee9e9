-- Schema 11: fleet-wide queue limits. A row of queue_limits caps a queue for
-- every daemon at once: max_running runs in status 'running', and a token
-- bucket of rate_per_second steps a second (holding at most burst tokens)
-- that the claim and each further step of a claimed run draw from. The
-- claim (sql/queries/claim_runs.sql) locks the rows of its limited queues;
-- queues without a row are claimed as before. Runs as <schema>_owner.
-- Builds one partial index over the running runs (few rows: one per busy
-- slot of the fleet); rewrites nothing.

CREATE TABLE IF NOT EXISTS {schema}.queue_limits (
  queue           text PRIMARY KEY,
  max_running     integer,
  rate_per_second double precision,
  burst           integer,
  -- The bucket as of refilled_at (database time); queue_tokens() adds what
  -- accrued since.
  tokens          double precision NOT NULL DEFAULT 0,
  refilled_at     timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT queue_limits_queue_check CHECK (queue <> ''),
  CONSTRAINT queue_limits_some_check CHECK (max_running IS NOT NULL OR rate_per_second IS NOT NULL),
  CONSTRAINT queue_limits_max_running_check CHECK (max_running >= 1),
  CONSTRAINT queue_limits_rate_check CHECK (rate_per_second > 0),
  CONSTRAINT queue_limits_burst_check CHECK ((burst IS NULL) = (rate_per_second IS NULL) AND burst >= 1)
);

-- Counting a limited queue's running runs reads this index alone.
CREATE INDEX IF NOT EXISTS runs_running_idx ON {schema}.runs (queue) WHERE status = 'running';

-- The tokens a queue's bucket holds now: what it held at p_refilled_at plus
-- what accrued since, at most p_burst. Null for a queue without a rate.
CREATE OR REPLACE FUNCTION {schema}.queue_tokens(p_rate double precision, p_burst integer,
                                                 p_tokens double precision,
                                                 p_refilled_at timestamptz)
RETURNS double precision LANGUAGE sql STABLE AS $$
  SELECT least(p_burst::double precision,
               p_tokens + p_rate * greatest(0, extract(epoch FROM now() - p_refilled_at)))
$$;

-- A queue's running runs as committed now. VOLATILE on purpose: in READ
-- COMMITTED each call takes a fresh snapshot, so a claim that waited for
-- another claim's lock on the queue's limit row counts that claim's runs
-- (the claim statement's own snapshot predates them).
CREATE OR REPLACE FUNCTION {schema}.queue_running(p_queue text)
RETURNS bigint LANGUAGE sql VOLATILE AS $$
  SELECT count(*) FROM {schema}.runs WHERE queue = p_queue AND status = 'running'
$$;
