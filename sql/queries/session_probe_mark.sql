-- The session check (CheckSessionPooling): marks this session with a token
-- and says which server process serves it.
SELECT pg_backend_pid(), set_config('cairn.session_probe', $1, false)
