INSERT INTO {schema}.workers (id, hostname, pid, queues, served_definitions)
VALUES ($1, $2, $3, $4::text[], $5::text[])
ON CONFLICT (id) DO UPDATE
  SET hostname = EXCLUDED.hostname, pid = EXCLUDED.pid, queues = EXCLUDED.queues,
      served_definitions = EXCLUDED.served_definitions, started_at = now(),
      heartbeat_at = now(), stopped_at = NULL
