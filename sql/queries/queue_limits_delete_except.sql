-- Lifts the limits of every queue not in $1; returns the queues lifted.
DELETE FROM {schema}.queue_limits WHERE queue <> ALL($1::text[]) RETURNING queue
