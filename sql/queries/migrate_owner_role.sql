-- The role migrations run as once the schema has its roles (version 6 on):
-- the owner of its tables, <schema>_owner, so that what a migration creates
-- belongs to it and follows its default privileges. No row before version 6
-- or when the session already is that role.
SELECT t.tableowner::text AS owner, pg_has_role(t.tableowner, 'MEMBER') AS may_set
FROM pg_tables t
WHERE t.schemaname = $1 AND t.tablename = 'schema_migrations' AND t.tableowner <> current_user
  AND to_regprocedure(quote_ident($1) || '.role_name(text)') IS NOT NULL
