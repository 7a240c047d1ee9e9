SELECT version, name, checksum, applied_at FROM {schema}.schema_migrations ORDER BY version
