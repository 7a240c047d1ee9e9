-- The table the example plugin's transactional steps write to. Apply once:
--   psql "$DATABASE_URL" -f plugins/example/schema.sql
-- For another schema, replace cairn_example below and pass "schema" in the
-- run's input.
CREATE SCHEMA IF NOT EXISTS cairn_example;

CREATE TABLE IF NOT EXISTS cairn_example.orders (
  order_id     text PRIMARY KEY,
  amount_cents bigint NOT NULL CHECK (amount_cents >= 0),
  status       text NOT NULL DEFAULT 'charged' CHECK (status IN ('charged', 'refunded')),
  charged_at   timestamptz NOT NULL DEFAULT now(),
  refunded_at  timestamptz
);
