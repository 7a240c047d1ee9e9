INSERT INTO {schema}.workers (id, hostname, pid, queues, served_definitions, version, concurrency)
VALUES ($1, $2, $3, $4::text[], $5::text[], $6, $7)
ON CONFLICT (id) DO UPDATE
  SET hostname = EXCLUDED.hostname, pid = EXCLUDED.pid, queues = EXCLUDED.queues,
      served_definitions = EXCLUDED.served_definitions, version = EXCLUDED.version,
      concurrency = EXCLUDED.concurrency, started_at = now(), heartbeat_at = now(),
      stopped_at = NULL
