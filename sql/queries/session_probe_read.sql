-- The session check: which server process serves this statement, and the
-- token session_probe_mark left, if the session is still the same one.
SELECT pg_backend_pid(), current_setting('cairn.session_probe', true)
