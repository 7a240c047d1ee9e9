-- The console's session: every statement is planned for the parameters of
-- its call (the console's queries take optional filters, $n IS NULL OR
-- column = $n, which a cached generic plan cannot use an index for), and a
-- read-only console ($1 = 'on') gets read-only transactions, so that the
-- server itself refuses any write. '' keeps the session's own setting.
SELECT set_config('plan_cache_mode', 'force_custom_plan', false),
       set_config('default_transaction_read_only',
                  COALESCE(NULLIF($1, ''), current_setting('default_transaction_read_only')), false)
