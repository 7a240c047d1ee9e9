-- Plans this transaction's statements for their parameters' values, in a
-- session that otherwise plans them once (session_setup.sql): for a
-- statement whose best plan depends on the values, such as next_due, where
-- a generic plan cannot tell a queue of ten ready runs from one of a million.
SELECT set_config('plan_cache_mode', 'force_custom_plan', true)
