SELECT set_config('statement_timeout', $1, true)
