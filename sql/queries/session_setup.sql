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
-- Such a session also compiles nothing with JIT, unless the operator set
-- jit: a generic plan's costs are estimated without the parameters' values,
-- high enough to pass jit_above_cost, and PostgreSQL compiles a plan again
-- at every execution. The claim took 30 ms of LLVM for 0.2 ms of work.
-- cairn.session_jit remembers the session's setting for a step's SQL.
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
                  false),
       set_config('cairn.session_jit', current_setting('jit'), false),
       set_config('jit',
                  CASE WHEN $5 AND (SELECT source FROM pg_settings WHERE name = 'jit') = 'default'
                       THEN 'off' ELSE current_setting('jit') END,
                  false)
