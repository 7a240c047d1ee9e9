-- What the server allows and what it holds now, for the daemon's start-up
-- checks: connection slots (less those reserved for superusers), client
-- connections open, and whether cairn's role is a superuser.
SELECT current_setting('max_connections')::int AS max_connections,
       current_setting('superuser_reserved_connections')::int AS reserved,
       (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::int AS in_use,
       (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser,
       current_user AS role
