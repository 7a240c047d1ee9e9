-- The tables the example plugin's transactional steps write to. Apply once:
--   psql "$DATABASE_URL" -f plugins/example/schema.sql
-- For another schema, replace cairn_example below and pass "schema" in the
-- run's input.
CREATE SCHEMA IF NOT EXISTS cairn_example;

-- Goods put aside for an order (reserve_stock), given back by its
-- compensation (release_stock) or handed to the carrier (ship).
CREATE TABLE IF NOT EXISTS cairn_example.reservations (
  order_id    text PRIMARY KEY,
  sku         text NOT NULL,
  quantity    integer NOT NULL CHECK (quantity > 0),
  status      text NOT NULL DEFAULT 'reserved'
              CHECK (status IN ('reserved', 'released', 'shipped')),
  reserved_at timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Charged orders (charge_payment), refunded by its compensation
-- (refund_payment).
CREATE TABLE IF NOT EXISTS cairn_example.orders (
  order_id     text PRIMARY KEY,
  amount_cents bigint NOT NULL CHECK (amount_cents >= 0),
  status       text NOT NULL DEFAULT 'charged' CHECK (status IN ('charged', 'refunded')),
  charged_at   timestamptz NOT NULL DEFAULT now(),
  refunded_at  timestamptz
);
