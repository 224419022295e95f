#!/usr/bin/env bash
# End-to-end tests of `quill serve` with real clients (issue 14 part 5),
# each against a server started on a free local port over a fresh data
# directory: psycopg2 with the Insert Benchmark's statements and psycopg 3
# (tests/e2e/python_clients.py), JDBC (tests/e2e/jdbc/QuillJdbc.java), 1,024
# connections at once (tests/e2e/many_connections.py), sysbench 1.0's eight OLTP tests at 1, 16
# and 64 threads with `quill check` afterwards (bench/sysbench.py), writers
# during CREATE INDEX CONCURRENTLY (bench/online_index.py), and a
# kill -9 of the server while clients commit (tests/e2e/crash.py).
# tokio-postgres and psql run in `cargo test` (crates/quill-server/tests).
#
#   tests/e2e/run.sh [SECONDS_PER_SYSBENCH_RUN [CARGO_PROFILE]]
#
# SECONDS_PER_SYSBENCH_RUN defaults to 10. CARGO_PROFILE (default release)
# is the profile the server is built with: these tests check behaviour, not
# speed, so CI passes `dev` and reuses the binary `cargo test` just built,
# with its debug assertions and overflow checks on, instead of paying for a
# whole-program-optimized release build.
#
# Installs what it needs: Debian's sysbench, postgresql-client and
# libpostgresql-jdbc-java (with a Java runtime), and psycopg2-binary and
# psycopg from PyPI.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs="${1:-10}"
profile="${2:-release}"

need_apt=()
command -v sysbench >/dev/null 2>&1 || need_apt+=(sysbench)
command -v psql >/dev/null 2>&1 || need_apt+=(postgresql-client)
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
[ -f /usr/share/java/postgresql.jar ] || need_apt+=(libpostgresql-jdbc-java)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing ${need_apt[*]}" >&2
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq || true
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi
if ! python3 -c "import psycopg2, psycopg" >/dev/null 2>&1; then
  echo "installing psycopg2-binary and psycopg" >&2
  python3 -m pip install -q "psycopg2-binary==2.9.13" "psycopg[binary]==3.3.9"
fi

cargo build --profile "$profile" -p quill-cli
case "$profile" in
  dev | test) quill=target/debug/quill ;;
  bench) quill=target/release/quill ;;
  *) quill="target/$profile/quill" ;;
esac
# 1,024 connections need as many descriptors in the server and the client.
ulimit -n 8192 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
dir=$(mktemp -d)
"$quill" serve --dir "$dir/data" --listen "127.0.0.1:$port" > "$dir/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
  if python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null; then break; fi
  sleep 0.1
done
echo "== Python drivers (psycopg2: Insert Benchmark statements; psycopg 3)"
python3 tests/e2e/python_clients.py "$port"
echo "== JDBC (Debian's PostgreSQL driver)"
java -cp /usr/share/java/postgresql.jar tests/e2e/jdbc/QuillJdbc.java "$port"
echo "== 1,024 connections at once, each in transactions for ${secs} s; server threads bounded"
if [ "$(ulimit -n)" -ge 2200 ]; then
  python3 tests/e2e/many_connections.py "$port" "$pid" --connections 1024 --seconds "$secs"
else
  echo "skipped: only $(ulimit -n) file descriptors allowed (1,024 connections need about 2,200)" >&2
fi
kill "$pid"; wait "$pid" || true
"$quill" check "$dir/data" >/dev/null
echo "== sysbench: eight OLTP tests at 1, 16 and 64 threads, ${secs} s each"
python3 bench/sysbench.py --quill "$quill" --threads 1,16,64 --time "$secs" --table-size 10000
echo "== CREATE INDEX CONCURRENTLY while writers update the indexed column"
python3 bench/online_index.py --quill "$quill" --rows 300000 --writers 2 --require-online | grep -E '^round|check'
echo "== kill -9 while clients commit: every acknowledged commit survives"
python3 tests/e2e/crash.py --quill "$quill" --seconds 3 --clients 8 --rounds 3
