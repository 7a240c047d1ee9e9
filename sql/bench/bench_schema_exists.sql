-- Whether a schema of this name exists at all (with cairn's tables or not):
-- `cairn bench` works only in a schema it created itself.
SELECT to_regnamespace($1::text) IS NOT NULL
