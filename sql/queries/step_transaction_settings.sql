-- The settings of a transactional step's transaction: its statements end at
-- the step's timeout ($1), and its own SQL is planned as the session would
-- plan it without cairn (session_setup.sql), not with the generic plans of
-- cairn's statements and without their jit setting.
SELECT set_config('statement_timeout', $1, true),
       set_config('plan_cache_mode', current_setting('cairn.session_plan_cache_mode'), true),
       set_config('jit', current_setting('cairn.session_jit'), true)
