-- The measured window of a phase (runs tagged $1 in their input), in
-- database time: the steps its runs committed (a step_committed event each,
-- or completed for a run's last), and the seconds from its first step
-- commit to its last finished run, so worker start-up is left out.
WITH phase AS MATERIALIZED (
  SELECT id, finished_at FROM {schema}.runs WHERE input @> $1::jsonb
), events AS MATERIALIZED (
  SELECT e.kind, e.created_at FROM {schema}.run_events e JOIN phase p ON e.run_id = p.id
)
SELECT (SELECT count(*) FROM events WHERE kind IN ('step_committed', 'completed')) AS steps,
       coalesce(extract(epoch FROM (SELECT max(finished_at) FROM phase) -
                                   (SELECT min(created_at) FROM events)), 0)::float8 AS seconds
