SELECT {schema}.start_run($1, $2::jsonb, $3, $4, $5, $6::timestamptz, $7, $8,
                          $9::bigint * interval '1 millisecond')
