SELECT * FROM {schema}.runs WHERE id = $1::uuid
