#!/usr/bin/env bash
# perf profiles of the server at several connection counts, for
# bench/perf_per_txn.py: the server on CPU 1 (SERVER_PIN), sysbench on
# CPU 0 (CLIENT_PIN), one fresh server and 10,000-row table; for each
# count a 25 s run, recorded 8 s in for 12 s
# (`perf record -e cpu-clock -F 2000 -g`; this VM has no hardware
# counters). Prints each run's TPS; compare two with
#   bench/perf_per_txn.py OUT/p-64.data $((TPS_64*12)) OUT/p-1024.data $((TPS_1024*12))
#
#   bench/serve-perfrecord.sh QUILL OUT_DIR THREADS...
#   SB_ARGS="--rand-type=uniform" bench/serve-perfrecord.sh target/release/quill /tmp/pr 64 1024
set -euo pipefail
quill=$(realpath "$1"); out=$2; shift 2
test=${TEST:-oltp_update_non_index}
spin=${SERVER_PIN-taskset -c 1}; cpin=${CLIENT_PIN-taskset -c 0}
mkdir -p "$out"
ulimit -n 8192
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
$spin "$quill" serve --dir "$dir/data" --listen "127.0.0.1:$port" > "$out/server.log" 2>&1 &
spid=$!
trap 'kill $spid 2>/dev/null || true; sleep 1; rm -rf "$dir"' EXIT
for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.2; done
sb=(--db-driver=pgsql --pgsql-host=127.0.0.1 --pgsql-port="$port" --pgsql-user=sbtest
    --pgsql-db=sbtest --tables=1 --table-size=10000)
sysbench "$test" "${sb[@]}" prepare > /dev/null
for n in "$@"; do
  # shellcheck disable=SC2086 # SB_ARGS is a list of flags
  $cpin sysbench "$test" "${sb[@]}" --threads="$n" --time=25 ${SB_ARGS:-} run > "$out/sb-$n.txt" 2>&1 &
  cpid=$!
  sleep 8
  perf record -e cpu-clock -F 2000 -g -p "$spid" -o "$out/p-$n.data" -- sleep 12 > /dev/null 2>&1
  wait $cpid
  tps=$(awk '/transactions:/ {gsub("\\(","",$3); print $3}' "$out/sb-$n.txt")
  echo "$n connections: $tps TPS ($out/p-$n.data)"
done
