-- The console's runs page: list_runs newest first, read the same way (two
-- arms, running runs apart). Keyset pagination over (created_at, id)
-- descending; $7/$8 are the last row of the previous page, $9 is one more
-- than a page, $10 the queue. The console's session plans each call for its
-- own parameters (console_session.sql), so the filters given pick their
-- index (migrations 14 and 24) instead of a generic plan.
WITH listed AS NOT MATERIALIZED (
  SELECT * FROM {schema}.runs
  WHERE ($1::text IS NULL OR namespace = $1)
    AND ($2::text IS NULL OR workflow = $2)
    AND ($3::text IS NULL OR status = $3)
    AND ($4::timestamptz IS NULL OR created_at >= $4::timestamptz)
    AND ($5::timestamptz IS NULL OR created_at < $5::timestamptz)
    AND ($6::text IS NULL OR starts_with(run_key, $6))
    AND ($10::text IS NULL OR queue = $10)
    AND ($7::timestamptz IS NULL OR (created_at, id) < ($7::timestamptz, $8::uuid))
)
(SELECT * FROM listed WHERE status <> 'running'
 ORDER BY created_at DESC, id DESC LIMIT CASE WHEN $3 = 'running' THEN 0 ELSE $9 END)
UNION ALL
(SELECT * FROM listed WHERE status = 'running'
 ORDER BY created_at DESC, id DESC LIMIT CASE WHEN $3 <> 'running' THEN 0 ELSE $9 END)
ORDER BY created_at DESC, id DESC
LIMIT $9
