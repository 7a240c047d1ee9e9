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
# The same build folder as scripts/test.sh; only the daemon and plugins are built here.
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build --parallel "$(nproc)" --target cairn cairn_plugin_modules
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

echo "==> starting order runs"
suffix=$(date +%s)
order() {  # order N [extra JSON fields]
  local input
  input=$(printf '{"order_id":"A-%s-%s","sku":"mug","quantity":%s,"amount_cents":%s%s}' \
    "$suffix" "$1" "$1" $(($1 * 900)) "${2:-}")
  "$cairn" start order --input "$input" --key "order-A-$suffix-$1"
}
paid=$(order 1)
early=$(order 2)
echo "==> order 2's payment is confirmed right away (kept in the inbox if the run does not wait yet)"
"$cairn" signal "payment:A-$suffix-2" --payload '{"provider_ref":"ch_2"}' ||
  echo "(exit $?: kept in the inbox until the run waits on it)"
late=$(order 3 ',"payment_timeout_ms":1500')
dropped=$(order 4)
bad=$("$cairn" start order --input '{"order_id":"A-'"$suffix"'-5","sku":"","quantity":1}')
undeliverable=$(order 6 ',"undeliverable":true')
for _ in $(seq 20); do "$cairn" start noop3 >/dev/null; done

wait_for_status() {  # wait_for_status RUN STATUS...
  local run=$1 status
  shift
  for _ in $(seq 100); do
    status=$("$cairn" show "$run" --json | sed -E 's/.*"status":"([a-z_]+)".*/\1/')
    for want in "$@"; do [ "$status" = "$want" ] && return 0; done
    sleep 0.1
  done
  echo "run $run is $status, expected $*" >&2
  return 1
}

echo "==> the payment provider confirms orders 1 and 6; order 4 is cancelled while it waits"
wait_for_status "$paid" waiting
"$cairn" signal "payment:A-$suffix-1" --payload '{"provider_ref":"ch_1"}'
"$cairn" signal "payment:A-$suffix-1" --payload '{"provider_ref":"ch_1"}' || echo "(exit $?: a duplicate changes nothing)"
wait_for_status "$undeliverable" waiting
"$cairn" signal "payment:A-$suffix-6" --payload '{"provider_ref":"ch_6"}'
wait_for_status "$dropped" waiting
"$cairn" cancel "$dropped" --reason "customer changed their mind"
echo "==> order 3 gets no payment and times out"
wait_for_status "$late" failed
"$cairn" signal "payment:A-$suffix-3" || echo "(exit $?: the wait expired)"

echo "==> waiting for the runs to settle"
wait_for_status "$paid" completed
wait_for_status "$early" completed
wait_for_status "$dropped" cancelled
wait_for_status "$undeliverable" failed

echo "==> runs"
"$cairn" list --created-after "$(date -u -d "@$((suffix - 1))" '+%Y-%m-%d %H:%M:%S+00')"
echo
echo "==> history of order run $paid"
"$cairn" history "$paid"
echo
echo "==> history of order run $undeliverable: paid and charged, then the carrier cannot"
echo "    deliver; its compensations refund the payment, then release the stock"
"$cairn" history "$undeliverable"
echo
echo "==> order 3 (timed out) and order 4 (cancelled while waiting) release their stock"
"$cairn" history "$late" | grep -E 'EVENT|wait_expired|compensat'
"$cairn" history "$dropped" | grep -E 'EVENT|cancelled|compensat'
echo
echo "==> order 5 (rejected input: nothing committed, nothing to undo)"
"$cairn" show "$bad" | grep -E '^(status|error|cursor) '
echo
echo "==> stock reserved, shipped or released, payments charged or refunded: each row"
echo "    written in the transaction of its run's checkpoint"
psql "$CAIRN_DATABASE_URL" -c \
  "SELECT r.order_id, r.quantity, r.status AS stock, o.amount_cents, o.status AS payment
     FROM cairn_example.reservations r LEFT JOIN cairn_example.orders o USING (order_id)
    WHERE r.order_id LIKE 'A-$suffix-%' ORDER BY r.order_id"
if $keep; then
  echo "daemon pid $daemon (log .data/cairn.log); CAIRN_DATABASE_URL=$CAIRN_DATABASE_URL"
  # The web console on the same database, read-only (no token): the runs
  # above are in it. CAIRN_CONSOLE_LISTEN picks another address.
  "$cairn" console --listen "${CAIRN_CONSOLE_LISTEN:-127.0.0.1:8080}" >.data/console.log 2>&1 &
  console=$!
  for _ in $(seq 50); do
    grep -q "serving" .data/console.log && break
    kill -0 "$console" 2>/dev/null || { cat .data/console.log; exit 1; }
    sleep 0.1
  done
  address=$(sed -n 's/^cairn console: serving \(http:[^ ]*\).*/\1/p' .data/console.log)
  echo "console pid $console (log .data/console.log): ${address}runs?workflow=order"
fi
