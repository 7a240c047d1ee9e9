-- Lets go of the session advisory locks this session holds but does not
-- count as stack locks of schema $1's runs $2 (Connection's holds).
-- Session locks outlive a rollback, so a statement that took a run's stack
-- lock and then failed leaves it behind; a slot's session holds no other
-- advisory lock of its own (a step's SQL has no business leaving session
-- state on it). One release each; the caller repeats while some were
-- released, for a lock taken twice. A bigint advisory key is classid (its
-- high half) and objid (its low half) in pg_locks, with objsubid 1.
SELECT count(*) FILTER (WHERE pg_advisory_unlock(held.key)) AS released
FROM (SELECT (l.classid::bigint << 32) | l.objid::bigint AS key
      FROM pg_locks l
      WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
        AND l.pid = pg_backend_pid() AND l.database = (SELECT oid FROM pg_database
                                                        WHERE datname = current_database())) held
WHERE held.key NOT IN (SELECT hashtextextended($1 || ':stack:' || run_id, 0)
                       FROM unnest($2::text[]) AS run_id)
