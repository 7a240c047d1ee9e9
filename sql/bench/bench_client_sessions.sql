-- Client sessions of this database other than the caller's: a phase's
-- counters are read once its workers' sessions are gone, because a session
-- hands its last statistics over when it ends.
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND backend_type = 'client backend'
  AND pid <> pg_backend_pid()
