-- One round trip for a whole batch: $1 is a JSON array of events.
INSERT INTO {schema}.run_events (run_id, step, attempt, kind, field, value)
SELECT e.run_id, e.step, coalesce(e.attempt, 0), e.kind, e.field, e.value
FROM jsonb_to_recordset($1::jsonb)
  AS e(run_id uuid, step text, attempt integer, kind text, field text, value jsonb)
