-- One bounded batch of finished runs older than $1 hours, with their history
-- and waits, through the function that may delete history (see migration 6).
SELECT runs, events, waits FROM {schema}.delete_finished_runs($1, $2)
