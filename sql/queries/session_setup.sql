-- Per-session settings: timestamps come back in UTC, and a transaction left
-- idle (a hung step) cannot hold locks and stall vacuum for ever.
SELECT set_config('application_name', $1, false),
       set_config('TimeZone', 'UTC', false),
       set_config('idle_in_transaction_session_timeout', $2, false)
