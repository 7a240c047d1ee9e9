SELECT floor(extract(epoch FROM now()))::bigint
