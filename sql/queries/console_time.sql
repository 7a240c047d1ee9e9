-- A time a person typed into a filter ("2026-12-01 10:00", "yesterday"), as
-- the database reads it in the session's time zone (UTC); an error names
-- the text when it is not a time.
SELECT $1::timestamptz::text
