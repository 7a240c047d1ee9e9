-- Milliseconds until the next claimable run of these queues is due (null:
-- none), so an idle poller wakes for a retry or a sleep without polling.
-- The poller asks after every claim that came back short, so this reads a
-- few index entries per queue and priority, however many runs wait for a
-- later time: runs_due_idx orders a queue by priority first, so `levels`
-- steps from one priority of a queue to the next lower one present (one
-- probe each), and each level's earliest run of a served definition is the
-- first one of its part of the index. A plain min(run_at) over the queues
-- read every ready run of them (0.2 s with 300 000 runs due tomorrow). The
-- plan is the same for any queues, so a session may plan it once.
-- greatest() skips a null: without the CASE, "none ready" came out as 0 ("due
-- now"), and an idle poller polled every millisecond. Queues with a limit
-- (queue_limits) are left out: their due runs may be held back by the limit,
-- and would wake the poller at once, again and again; the poller claims from
-- them every worker.poll_interval and when woken.
WITH RECURSIVE queues AS (
  SELECT DISTINCT q.queue FROM unnest($1::text[]) AS q(queue)
  WHERE NOT EXISTS (SELECT FROM {schema}.queue_limits l WHERE l.queue = q.queue)),
levels AS (
  SELECT q.queue, (SELECT r.priority FROM {schema}.runs r
                   WHERE r.status IN ('ready', 'compensating') AND r.queue = q.queue
                   ORDER BY r.priority DESC LIMIT 1) AS priority
  FROM queues q
  UNION ALL
  SELECT l.queue, (SELECT r.priority FROM {schema}.runs r
                   WHERE r.status IN ('ready', 'compensating') AND r.queue = l.queue
                     AND r.priority < l.priority
                   ORDER BY r.priority DESC LIMIT 1)
  FROM levels l
  WHERE l.priority IS NOT NULL),
earliest AS (
  SELECT (SELECT r.run_at FROM {schema}.runs r
          WHERE r.status IN ('ready', 'compensating') AND r.queue = l.queue
            AND r.priority = l.priority AND r.definition_hash = ANY($2::text[])
          ORDER BY r.run_at LIMIT 1) AS run_at
  FROM levels l
  WHERE l.priority IS NOT NULL)
SELECT CASE WHEN next IS NOT NULL
            THEN greatest(0, extract(epoch FROM next - now()) * 1000)::bigint END
FROM (SELECT min(run_at) AS next FROM earliest) e
