-- Keyset pagination over (created_at, id); $7/$8 are the last row of the
-- previous page, $10 the queue. The caller asks for one row more than a page
-- to know whether another page follows. console_runs.sql is the same list
-- newest first.
SELECT * FROM {schema}.runs
WHERE ($1::text IS NULL OR namespace = $1)
  AND ($2::text IS NULL OR workflow = $2)
  AND ($3::text IS NULL OR status = $3)
  AND ($4::timestamptz IS NULL OR created_at >= $4::timestamptz)
  AND ($5::timestamptz IS NULL OR created_at < $5::timestamptz)
  AND ($6::text IS NULL OR starts_with(run_key, $6))
  AND ($10::text IS NULL OR queue = $10)
  AND ($7::timestamptz IS NULL OR (created_at, id) > ($7::timestamptz, $8::uuid))
ORDER BY created_at, id
LIMIT $9
