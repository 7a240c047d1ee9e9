-- Fills runs with $1 rows of one definition ($2 workflow, $3 version, $4
-- hash) in queue $5, at cursor $6, status $7 ('ready': due now, or
-- 'completed': finished now), straight into the table rather than through
-- start_run: the claim benchmark needs a million rows in a few minutes, and
-- pgbench needs a backlog that costs nothing to measure.
INSERT INTO {schema}.runs (workflow, definition_version, definition_hash, queue, cursor, status,
                           run_at, finished_at)
SELECT $2, $3::integer, $4, $5, $6, $7, now() - interval '1 second',
       CASE WHEN $7 = 'completed' THEN now() END
FROM generate_series(1, $1::integer)
