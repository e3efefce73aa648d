#!/usr/bin/env bash
# A scratch PostgreSQL 15 server for kope's tests and benchmarks (Debian's `postgresql` package).
#
#   scripts/services/postgres.sh start   # initdb + pg_ctl start, creates database `kope`,
#                                        # prints `export KOPE_TEST_POSTGRES=postgresql://...`
#   scripts/services/postgres.sh env     # prints the export line of the running server
#   scripts/services/postgres.sh stop    # stops it and removes the scratch directory
#
# The server listens on a free loopback port and a unix socket inside the scratch directory
# ($KOPE_POSTGRES_DIR, default /tmp/kope-postgres-$UID), trusts local connections, and runs as
# the `postgres` user when started as root (PostgreSQL refuses to run as root). `start` fails
# with a message naming why (no server binaries, initdb or start failure); callers skip then.
set -euo pipefail

dir="${KOPE_POSTGRES_DIR:-/tmp/kope-postgres-$(id -u)}"
bin="${KOPE_POSTGRES_BIN:-/usr/lib/postgresql/15/bin}"
# Started as root, the server runs as `postgres`, which must reach the directory: where a parent
# is closed to it (a checkout under /root), the server lives under /tmp instead, named after the
# directory asked for, so start and stop agree.
if [ "$(id -u)" = 0 ] && id postgres >/dev/null 2>&1; then
  parent="$(dirname "$dir")"
  mkdir -p "$parent"
  if ! runuser -u postgres -- test -x "$parent" 2>/dev/null || ! runuser -u postgres -- test -r "$parent" 2>/dev/null; then
    dir="/tmp/kope-postgres-$(printf '%s' "$dir" | sha1sum | cut -c1-12)"
  fi
fi
data="$dir/data"

as_server() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

url() {
  local port
  port="$(cat "$dir/port")"
  echo "postgresql://postgres@127.0.0.1:$port/kope"
}

start() {
  if [ ! -x "$bin/initdb" ] || [ ! -x "$bin/pg_ctl" ]; then
    echo "postgres.sh: no PostgreSQL server binaries in $bin (install the 'postgresql' package)" >&2
    return 1
  fi
  if [ -f "$dir/port" ] && as_server "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    echo "export KOPE_TEST_POSTGRES=$(url)"
    return 0
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres "$dir"
  if ! as_server "$bin/initdb" -D "$data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1; then
    echo "postgres.sh: initdb failed (see $dir/initdb.log)" >&2
    return 1
  fi
  local port
  port="$(free_port)"
  echo "$port" >"$dir/port"
  # Small, test-sized settings; fsync stays on (the store's durability is part of what is tested).
  local opts="-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c max_connections=200 -c shared_buffers=128MB"
  if ! as_server "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -o "$opts" -w -t 60 start >/dev/null; then
    echo "postgres.sh: the server did not start (see $dir/server.log)" >&2
    return 1
  fi
  if ! as_server "$bin/psql" -h "$dir" -p "$port" -U postgres -d postgres -qAt -c "CREATE DATABASE kope" >/dev/null; then
    echo "postgres.sh: cannot create the database 'kope'" >&2
    return 1
  fi
  echo "export KOPE_TEST_POSTGRES=$(url)"
}

stop() {
  if [ -d "$data" ]; then as_server "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true; fi
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  env) [ -f "$dir/port" ] && echo "export KOPE_TEST_POSTGRES=$(url)" ;;
  *) echo "usage: $0 start|stop|env" >&2; exit 2 ;;
esac
