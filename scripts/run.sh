#!/usr/bin/env bash
# The run command: everything from a fresh Debian 12 machine to cairn
# executing real workflows. Installs dependencies, builds, starts a private
# PostgreSQL under .data/ (unless CAIRN_DATABASE_URL is set), migrates the
# schema, runs the daemon with the example plugin, starts order runs and
# prints what happened to them. With --keep the daemon and the server stay up.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
keep=false
[ "${1:-}" = "--keep" ] && keep=true

echo "==> dependencies and build"
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF >/dev/null
cmake --build build --parallel "$(nproc)"
cairn="$root/build/daemon/cairn"

started_postgres=false
if [ -z "${CAIRN_DATABASE_URL:-}" ]; then
  echo "==> private PostgreSQL under .data/postgres"
  CAIRN_DATABASE_URL=$(bash scripts/postgres.sh start)
  started_postgres=true
fi
export CAIRN_DATABASE_URL

echo "==> schema"
"$cairn" migrate
psql "$CAIRN_DATABASE_URL" -q -v ON_ERROR_STOP=1 -f plugins/example/schema.sql

echo "==> daemon"
mkdir -p .data
"$cairn" run --config config/local.yaml >.data/cairn.log 2>&1 &
daemon=$!
cleanup() {
  if ! $keep; then
    kill -TERM "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null || true
    $started_postgres && bash scripts/postgres.sh stop
  fi
}
trap cleanup EXIT
for _ in $(seq 100); do
  grep -q "started" .data/cairn.log && break
  kill -0 "$daemon" 2>/dev/null || { cat .data/cairn.log; exit 1; }
  sleep 0.1
done
"$cairn" plugins --config config/local.yaml

echo "==> starting runs"
suffix=$(date +%s)
ids=()
for n in 1 2 3; do
  input=$(printf '{"order_id":"A-%s-%s","sku":"mug","quantity":%s,"amount_cents":%s}' \
    "$suffix" "$n" "$n" $((n * 900)))
  ids+=("$("$cairn" start order --input "$input" --key "order-A-$suffix-$n")")
done
bad=$("$cairn" start order --input '{"order_id":"A-'"$suffix"'-bad","sku":"","quantity":1}')
ids+=("$bad")
for _ in $(seq 20); do
  "$cairn" start noop3 >/dev/null
done

echo "==> waiting for the runs to settle"
for _ in $(seq 100); do
  busy=$(psql "$CAIRN_DATABASE_URL" -tAc \
    "SELECT count(*) FROM cairn.runs WHERE status IN ('ready', 'running')")
  [ "$busy" = "0" ] && break
  sleep 0.2
done

echo "==> runs"
"$cairn" list
echo
echo "==> history of order run ${ids[0]}"
"$cairn" history "${ids[0]}"
echo
echo "==> the rejected order ${bad}"
"$cairn" show "$bad" | grep -E '^(status|error|cursor) '
echo
echo "==> orders charged in the same transaction as their checkpoints"
psql "$CAIRN_DATABASE_URL" -c \
  "SELECT order_id, amount_cents, status FROM cairn_example.orders ORDER BY charged_at DESC LIMIT 3"
if $keep; then
  echo "daemon pid $daemon (log .data/cairn.log); CAIRN_DATABASE_URL=$CAIRN_DATABASE_URL"
fi
