-- Per-session settings: timestamps come back in UTC, a transaction left idle
-- (a hung step) cannot hold locks and stall vacuum for ever, cairn's
-- statements run at the isolation they are written for, whatever the
-- database's default, and a session that must never wait long (lease
-- renewal, maintenance) bounds every statement and every lock wait. An
-- empty bound keeps what the session already has from the role, the database
-- or the URL's options, so an operator's own setting is never reset.
-- A session that runs cairn's own statements over and over ($5: the poller
-- and the slots) plans each prepared statement once (force_generic_plan):
-- left to choose, PostgreSQL re-plans them for every execution, and planning
-- the claim took longer than running it. An operator's own plan_cache_mode
-- is kept, and cairn.session_plan_cache_mode remembers the session's mode
-- for a transactional step's own SQL (step_transaction_settings.sql).
SELECT set_config('application_name', $1, false),
       set_config('TimeZone', 'UTC', false),
       set_config('idle_in_transaction_session_timeout', $2, false),
       set_config('default_transaction_isolation', 'read committed', false),
       set_config('statement_timeout', COALESCE(NULLIF($3, ''), current_setting('statement_timeout')), false),
       set_config('lock_timeout', COALESCE(NULLIF($4, ''), current_setting('lock_timeout')), false),
       set_config('cairn.session_plan_cache_mode', current_setting('plan_cache_mode'), false),
       set_config('plan_cache_mode',
                  CASE WHEN $5 AND current_setting('plan_cache_mode') = 'auto'
                       THEN 'force_generic_plan' ELSE current_setting('plan_cache_mode') END,
                  false)
