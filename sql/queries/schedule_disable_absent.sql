-- Disables the enabled schedules that are no longer declared. $1: a JSON
-- array of the declared names.
UPDATE {schema}.schedules
SET enabled = false, updated_at = now()
WHERE enabled AND name <> ALL (SELECT jsonb_array_elements_text($1::jsonb))
RETURNING name
