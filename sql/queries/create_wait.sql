SELECT {schema}.create_wait($1, $2::uuid, $3, $4, $5, $6, $7)
