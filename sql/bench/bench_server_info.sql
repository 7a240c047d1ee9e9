-- The server a benchmark measured, for its report: version, where it
-- listens, and the settings that decide what a commit costs.
-- shared_preload_libraries is read through pg_settings, which shows it only
-- to roles allowed to see it (null otherwise).
SELECT version() AS version,
       current_setting('server_version_num')::integer AS version_num,
       coalesce(host(inet_server_addr()), 'unix socket') AS host,
       coalesce(inet_server_port(), 0) AS port,
       current_setting('fsync') AS fsync,
       current_setting('synchronous_commit') AS synchronous_commit,
       current_setting('full_page_writes') AS full_page_writes,
       current_setting('wal_level') AS wal_level,
       current_setting('shared_buffers') AS shared_buffers,
       current_setting('max_wal_size') AS max_wal_size,
       current_setting('checkpoint_timeout') AS checkpoint_timeout,
       current_setting('max_connections')::integer AS max_connections,
       (SELECT s.setting FROM pg_settings s WHERE s.name = 'shared_preload_libraries')
         AS shared_preload_libraries
