SELECT {schema}.signal($1, $2::jsonb, $3 * interval '1 millisecond')
