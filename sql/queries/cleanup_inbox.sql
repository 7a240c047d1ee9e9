DELETE FROM {schema}.signal_inbox
WHERE correlation_key IN (SELECT correlation_key FROM {schema}.signal_inbox
                          WHERE expires_at <= now() LIMIT $1 FOR UPDATE SKIP LOCKED)
RETURNING 1
