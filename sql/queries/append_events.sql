-- One round trip for a whole batch: $1 is a JSON array of events.
SELECT {schema}.append_events($1::jsonb)
