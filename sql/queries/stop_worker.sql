UPDATE {schema}.workers SET stopped_at = now() WHERE id = $1
