-- Drops the schema with everything in it, then the roles named after it
-- (version 6 on) where this session may: a role that still holds objects or
-- privileges elsewhere (another database with a schema of the same name) is
-- left alone.
DO $drop$
DECLARE
  roles text[] := '{}';
  doomed text;
BEGIN
  IF to_regprocedure('{schema}.role_name(text)') IS NOT NULL THEN
    roles := ARRAY[{schema}.role_name('app'), {schema}.role_name('worker'),
                   {schema}.role_name('owner')];
  END IF;
  DROP SCHEMA IF EXISTS {schema} CASCADE;
  FOREACH doomed IN ARRAY roles LOOP
    BEGIN
      EXECUTE format('DROP OWNED BY %I', doomed);
      EXECUTE format('DROP ROLE %I', doomed);
    EXCEPTION WHEN dependent_objects_still_exist OR insufficient_privilege OR undefined_object THEN
      RAISE NOTICE 'role % kept: %', doomed, SQLERRM;
    END;
  END LOOP;
END $drop$
