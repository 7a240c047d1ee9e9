-- SET LOCAL ROLE $1: for the rest of the migration's transaction.
SELECT set_config('role', $1, true)
