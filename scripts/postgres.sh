#!/usr/bin/env bash
# A private PostgreSQL 15 server under a folder of the checkout (default
# .data/postgres), for the README's run command and for trying cairn by hand.
#   scripts/postgres.sh start   initdb if needed, start, print the URL
#   scripts/postgres.sh stop    stop it
#   scripts/postgres.sh url     print the URL
# As root, the server runs as the postgres account (initdb refuses root).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
data_root=${CAIRN_PG_DIR:-$root/.data/postgres}
port=${CAIRN_PG_PORT:-54329}
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$bindir" ] || { echo "postgres.sh: no PostgreSQL server found; run scripts/install-deps.sh" >&2; exit 1; }

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

url() { echo "postgresql://postgres@127.0.0.1:$port/postgres"; }

case "${1:-}" in
  start)
    mkdir -p "$data_root"
    if [ "$(id -u)" -eq 0 ]; then chown postgres: "$data_root"; fi
    if [ ! -f "$data_root/data/PG_VERSION" ]; then
      as_owner "$bindir/initdb" -D "$data_root/data" -U postgres --auth=trust --no-sync \
        -E UTF8 --locale=C.UTF-8 >"$data_root/initdb.log" 2>&1 ||
        { cat "$data_root/initdb.log" >&2; exit 1; }
    fi
    if ! as_owner "$bindir/pg_ctl" -D "$data_root/data" status >/dev/null 2>&1; then
      as_owner "$bindir/pg_ctl" -D "$data_root/data" -w -l "$data_root/server.log" \
        -o "-p $port -k $data_root -c listen_addresses=127.0.0.1 -c max_connections=200" \
        start >/dev/null || { tail -n 20 "$data_root/server.log" >&2; exit 1; }
    fi
    url
    ;;
  stop)
    if [ -f "$data_root/data/PG_VERSION" ]; then
      as_owner "$bindir/pg_ctl" -D "$data_root/data" -m fast stop >/dev/null 2>&1 || true
    fi
    ;;
  url) url ;;
  *) echo "usage: scripts/postgres.sh start|stop|url" >&2; exit 2 ;;
esac
