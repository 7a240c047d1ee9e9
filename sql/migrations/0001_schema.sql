-- cairn schema, version 1: runs, their history, wait records, schedules,
-- the idempotency store and registered workers.
-- {schema} is replaced by the validated, quoted schema name before this runs.
-- Released migrations are never edited: add a new numbered file instead.

CREATE TABLE {schema}.runs (
  id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  namespace          text NOT NULL DEFAULT 'default',
  workflow           text NOT NULL,
  definition_version integer NOT NULL,
  definition_hash    text NOT NULL,
  run_key            text,
  queue              text NOT NULL DEFAULT 'default',
  priority           integer NOT NULL DEFAULT 0,
  input              jsonb NOT NULL DEFAULT '{}'::jsonb,
  context            jsonb NOT NULL DEFAULT '{}'::jsonb,
  cursor             text,
  attempt            integer NOT NULL DEFAULT 0,
  status             text NOT NULL DEFAULT 'ready',
  run_at             timestamptz NOT NULL DEFAULT now(),
  lease_owner        text,
  lease_expires_at   timestamptz,
  version            bigint NOT NULL DEFAULT 1,
  output             jsonb,
  error              text,
  parent_run_id      uuid REFERENCES {schema}.runs (id) ON DELETE SET NULL,
  cancel_reason      text,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  finished_at        timestamptz,
  CONSTRAINT runs_status_check CHECK (status IN (
    'ready', 'running', 'waiting', 'completed', 'failed', 'cancelled',
    'compensating', 'compensation_failed')),
  CONSTRAINT runs_namespace_check CHECK (namespace <> ''),
  CONSTRAINT runs_workflow_check CHECK (workflow <> ''),
  CONSTRAINT runs_queue_check CHECK (queue <> ''),
  CONSTRAINT runs_key_check CHECK (run_key IS NULL OR run_key <> ''),
  CONSTRAINT runs_attempt_check CHECK (attempt >= 0),
  CONSTRAINT runs_version_check CHECK (version >= 1),
  CONSTRAINT runs_context_check CHECK (jsonb_typeof(context) = 'object'),
  -- A leased run has both an owner and an expiry; only running runs hold one.
  CONSTRAINT runs_lease_check CHECK (
    (status = 'running') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)),
  CONSTRAINT runs_finished_check CHECK (
    (status IN ('completed', 'failed', 'cancelled', 'compensation_failed')) = (finished_at IS NOT NULL)),
  CONSTRAINT runs_key_unique UNIQUE (namespace, workflow, run_key)
);

-- Claiming reads only this index: it holds ready rows alone, so millions of
-- finished runs do not slow it down.
CREATE INDEX runs_due_idx ON {schema}.runs (queue, priority DESC, run_at, id)
  WHERE status = 'ready';
-- The lease reaper scans running rows by expiry.
CREATE INDEX runs_lease_idx ON {schema}.runs (lease_expires_at)
  WHERE status = 'running';
-- Listing by workflow and status in creation order, with keyset pagination.
CREATE INDEX runs_list_idx ON {schema}.runs (workflow, status, created_at, id);
CREATE INDEX runs_created_idx ON {schema}.runs (created_at, id);
-- Retention finds old finished runs without touching live ones.
CREATE INDEX runs_finished_idx ON {schema}.runs (finished_at)
  WHERE finished_at IS NOT NULL;
CREATE INDEX runs_parent_idx ON {schema}.runs (parent_run_id)
  WHERE parent_run_id IS NOT NULL;

-- Hot rows are updated at every step: leave room on the page for HOT updates
-- and vacuum them eagerly.
ALTER TABLE {schema}.runs SET (fillfactor = 80,
  autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);

-- Append-only history: one row per changed context field and per lifecycle
-- transition. position orders all events of the schema.
CREATE TABLE {schema}.run_events (
  position   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  run_id     uuid NOT NULL REFERENCES {schema}.runs (id) ON DELETE CASCADE,
  step       text,
  attempt    integer NOT NULL DEFAULT 0,
  kind       text NOT NULL,
  field      text,
  value      jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT run_events_kind_check CHECK (kind <> ''),
  CONSTRAINT run_events_field_check CHECK ((kind = 'context') = (field IS NOT NULL))
);
CREATE INDEX run_events_run_idx ON {schema}.run_events (run_id, position);
CREATE INDEX run_events_created_idx ON {schema}.run_events (created_at);

CREATE TABLE {schema}.wait_records (
  correlation_key   text PRIMARY KEY,
  run_id            uuid NOT NULL REFERENCES {schema}.runs (id) ON DELETE CASCADE,
  event             text NOT NULL,
  continuation_step text NOT NULL,
  timeout_step      text,
  status            text NOT NULL DEFAULT 'WAITING',
  payload           jsonb,
  claimant          text,
  expires_at        timestamptz,
  created_at        timestamptz NOT NULL DEFAULT now(),
  claimed_at        timestamptz,
  resumed_at        timestamptz,
  finished_at       timestamptz,
  CONSTRAINT wait_records_status_check CHECK (status IN (
    'WAITING', 'RESUMING', 'RESUMED', 'CANCELLED', 'EXPIRED')),
  CONSTRAINT wait_records_key_check CHECK (correlation_key <> ''),
  CONSTRAINT wait_records_event_check CHECK (event <> ''),
  CONSTRAINT wait_records_claim_check CHECK (
    status NOT IN ('RESUMING', 'RESUMED') OR claimant IS NOT NULL),
  CONSTRAINT wait_records_finished_check CHECK (
    (status IN ('RESUMED', 'CANCELLED', 'EXPIRED')) = (finished_at IS NOT NULL))
);
CREATE INDEX wait_records_run_idx ON {schema}.wait_records (run_id);
-- Expiry scans only live waits.
CREATE INDEX wait_records_expiry_idx ON {schema}.wait_records (expires_at)
  WHERE status = 'WAITING' AND expires_at IS NOT NULL;
CREATE INDEX wait_records_finished_idx ON {schema}.wait_records (finished_at)
  WHERE finished_at IS NOT NULL;

CREATE TABLE {schema}.schedules (
  name           text PRIMARY KEY,
  workflow       text NOT NULL,
  cron           text NOT NULL,
  timezone       text NOT NULL DEFAULT 'UTC',
  queue          text NOT NULL DEFAULT 'default',
  input          jsonb NOT NULL DEFAULT '{}'::jsonb,
  missed_policy  text NOT NULL DEFAULT 'skip',
  catch_up_limit integer NOT NULL DEFAULT 1,
  enabled        boolean NOT NULL DEFAULT true,
  next_fire_at   timestamptz,
  last_fire_at   timestamptz,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT schedules_name_check CHECK (name <> ''),
  CONSTRAINT schedules_policy_check CHECK (missed_policy IN ('skip', 'catch_up')),
  CONSTRAINT schedules_catch_up_check CHECK (catch_up_limit >= 0)
);
CREATE INDEX schedules_due_idx ON {schema}.schedules (next_fire_at) WHERE enabled;

CREATE TABLE {schema}.idempotency_keys (
  key          text PRIMARY KEY,
  status       text NOT NULL,
  owner        text,
  result       jsonb,
  expires_at   timestamptz NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz,
  CONSTRAINT idempotency_keys_key_check CHECK (key <> ''),
  CONSTRAINT idempotency_keys_status_check CHECK (status IN ('in_progress', 'completed')),
  CONSTRAINT idempotency_keys_completed_check CHECK (
    (status = 'completed') = (completed_at IS NOT NULL))
);
CREATE INDEX idempotency_keys_expiry_idx ON {schema}.idempotency_keys (expires_at);

CREATE TABLE {schema}.workers (
  id                 text PRIMARY KEY,
  hostname           text NOT NULL,
  pid                integer NOT NULL,
  queues             text[] NOT NULL DEFAULT '{}',
  served_definitions text[] NOT NULL DEFAULT '{}',
  started_at         timestamptz NOT NULL DEFAULT now(),
  heartbeat_at       timestamptz NOT NULL DEFAULT now(),
  stopped_at         timestamptz
);
CREATE INDEX workers_heartbeat_idx ON {schema}.workers (heartbeat_at) WHERE stopped_at IS NULL;

-- Definitions that workers have loaded. A run is pinned to one (workflow,
-- version, hash); the SQL API starts new runs on the newest registered one.
CREATE TABLE {schema}.workflow_definitions (
  hash          text PRIMARY KEY,
  workflow      text NOT NULL,
  version       integer NOT NULL,
  first_step    text NOT NULL,
  definition    jsonb NOT NULL,
  registered_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT workflow_definitions_version_check CHECK (version >= 1)
);
CREATE INDEX workflow_definitions_workflow_idx
  ON {schema}.workflow_definitions (workflow, version DESC, registered_at DESC);
