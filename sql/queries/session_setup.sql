-- Per-session settings: timestamps come back in UTC, a transaction left idle
-- (a hung step) cannot hold locks and stall vacuum for ever, and cairn's
-- statements run at the isolation they are written for, whatever the
-- database's default.
SELECT set_config('application_name', $1, false),
       set_config('TimeZone', 'UTC', false),
       set_config('idle_in_transaction_session_timeout', $2, false),
       set_config('default_transaction_isolation', 'read committed', false)
