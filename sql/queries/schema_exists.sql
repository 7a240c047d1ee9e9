SELECT to_regclass(quote_ident($1) || '.schema_migrations') IS NOT NULL
