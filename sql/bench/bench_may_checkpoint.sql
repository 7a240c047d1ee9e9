-- Whether this role may run CHECKPOINT: a superuser, or from PostgreSQL 15
-- a member of pg_checkpoint.
SELECT r.rolsuper OR EXISTS (SELECT FROM pg_roles c
                             WHERE c.rolname = 'pg_checkpoint'
                               AND pg_has_role(current_user, c.oid, 'USAGE'))
FROM pg_roles r WHERE r.rolname = current_user
