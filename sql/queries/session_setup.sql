-- Per-session settings: timestamps come back in UTC, a transaction left idle
-- (a hung step) cannot hold locks and stall vacuum for ever, cairn's
-- statements run at the isolation they are written for, whatever the
-- database's default, and a session that must never wait long (lease
-- renewal, maintenance) bounds every statement and every lock wait ('0':
-- no bound).
SELECT set_config('application_name', $1, false),
       set_config('TimeZone', 'UTC', false),
       set_config('idle_in_transaction_session_timeout', $2, false),
       set_config('default_transaction_isolation', 'read committed', false),
       set_config('statement_timeout', $3, false),
       set_config('lock_timeout', $4, false)
