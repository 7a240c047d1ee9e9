#!/usr/bin/env bash
# The console's benchmark: how fast `cairn console` answers its pages with a
# large runs table (1,000,000 runs by default). It fills a scratch schema
# (cairn_bench_console, dropped at the end unless --keep) with finished and
# live runs over 20 workflows and 5 queues, starts a real `cairn console` on
# a free port and times each page with curl: the runs list unfiltered and
# with each filter, a deep page (by cursor), a run page, and the other pages.
# Prints one line per page: median and p95 of CAIRN_BENCH_REQUESTS requests.
#
#   scripts/bench-console.sh [--runs N] [--keep] [--reuse]
#
# --keep leaves the schema in place; --reuse measures the schema a --keep
# left (without filling it again). The table is vacuumed after it is filled
# and each page is fetched once before it is timed, so the figures are those
# of a settled table, not of the first reads after a bulk load.
# Uses $CAIRN_DATABASE_URL, else the private server of scripts/postgres.sh.
# Needs a built binary (build/daemon/cairn) and curl.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs=1000000
keep=false
reuse=false
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --keep) keep=true; shift ;;
    --reuse) reuse=true; keep=true; shift ;;
    *) echo "usage: scripts/bench-console.sh [--runs N] [--keep] [--reuse]" >&2; exit 2 ;;
  esac
done
requests=${CAIRN_BENCH_REQUESTS:-20}
cairn=${CAIRN_BINARY:-build/daemon/cairn}
schema=cairn_bench_console
[ -x "$cairn" ] || { echo "bench-console: build $cairn first (cmake --build build --target cairn)" >&2; exit 1; }
command -v curl >/dev/null || { echo "bench-console: needs curl" >&2; exit 1; }
if [ -z "${CAIRN_DATABASE_URL:-}" ]; then CAIRN_DATABASE_URL=$(bash scripts/postgres.sh start); fi
export CAIRN_DATABASE_URL

psql_() { psql "$CAIRN_DATABASE_URL" -X -q -v ON_ERROR_STOP=1 "$@"; }

if $reuse; then
  runs=$(psql_ -At -c "SELECT count(*) FROM $schema.runs")
else
  echo "==> $runs runs in schema $schema" >&2
  psql_ -c "DROP SCHEMA IF EXISTS $schema CASCADE" 2>/dev/null || true
  "$cairn" migrate --schema "$schema" >/dev/null
  # A realistic mix: most runs finished long ago, a few live ones; created over
  # 30 days; one start key in two.
  psql_ <<SQL
INSERT INTO $schema.workflow_definitions (hash, workflow, version, first_step, definition)
SELECT 'hash-w' || w, 'w' || w, 1, 's1', '{"steps": [{"name": "s1"}, {"name": "s2"}]}'
FROM generate_series(0, 19) w;
INSERT INTO $schema.runs (workflow, definition_version, definition_hash, run_key, queue, status,
                          finished_at, created_at, cursor, input)
SELECT 'w' || (g % 20), 1, 'hash-w' || (g % 20),
       CASE WHEN g % 2 = 0 THEN 'order-' || g END, 'q' || (g % 5),
       s.status, CASE WHEN s.status IN ('completed', 'failed', 'cancelled') THEN now() END,
       now() - (g::float8 / $runs) * interval '30 days', 's1', jsonb_build_object('n', g)
FROM generate_series(1, $runs) g,
LATERAL (SELECT CASE WHEN g % 100 < 93 THEN 'completed' WHEN g % 100 < 97 THEN 'failed'
                     WHEN g % 100 < 98 THEN 'cancelled' WHEN g % 100 < 99 THEN 'waiting'
                     ELSE 'ready' END AS status) s;
SQL
  psql_ -c "VACUUM (ANALYZE) $schema.runs"
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$cairn" console --listen "127.0.0.1:$port" --schema "$schema" >/tmp/cairn-bench-console.log 2>&1 &
console=$!
finish() {
  kill -TERM "$console" 2>/dev/null && wait "$console" 2>/dev/null || true
  $keep || psql_ -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
}
trap finish EXIT
for _ in $(seq 100); do
  grep -q "serving" /tmp/cairn-bench-console.log && break
  kill -0 "$console" 2>/dev/null || { cat /tmp/cairn-bench-console.log >&2; exit 1; }
  sleep 0.1
done
base="http://127.0.0.1:$port"
run=$(psql_ -At -c "SELECT id FROM $schema.runs ORDER BY created_at LIMIT 1 OFFSET $((runs / 2))")
cursor=$(curl -fsS "$base/api/v1/runs?limit=200" |
  python3 -c 'import json, sys, urllib.parse; print(urllib.parse.quote(json.load(sys.stdin)["next_cursor"]))')

measure() {  # measure NAME PATH
  local times status
  status=$(curl -s -o /dev/null -w '%{http_code}' "$base$2")
  [ "$status" = 200 ] || { echo "bench-console: $2 answered $status" >&2; exit 1; }
  # (that first request warmed the page up; it is not counted)
  times=$(for _ in $(seq "$requests"); do curl -s -o /dev/null -w '%{time_total}\n' "$base$2"; done | sort -n)
  python3 - "$1" "$2" <<PY
import sys
times = [float(t) * 1000 for t in """$times""".split()]
median = times[len(times) // 2]
p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
print(f"{sys.argv[1]:<28} median {median:7.1f} ms   p95 {p95:7.1f} ms   {sys.argv[2]}")
PY
}

echo "==> $requests requests per page, $runs runs" >&2
measure "runs page" "/runs"
measure "runs page (JSON)" "/api/v1/runs"
measure "status=waiting" "/runs?status=waiting"
measure "status=failed" "/runs?status=failed"
measure "workflow=w7" "/runs?workflow=w7"
measure "workflow=w7&status=ready" "/runs?workflow=w7&status=ready"
measure "queue=q3" "/runs?queue=q3"
measure "key_prefix=order-99" "/runs?key_prefix=order-99"
measure "created_after=2 days ago" "/runs?created_after=$(date -u -d '2 days ago' +%Y-%m-%dT%H:%M)"
measure "next page (cursor)" "/runs?limit=200&cursor=$cursor"
measure "run page" "/runs/$run"
measure "queues page" "/queues"
measure "definitions page" "/definitions"
