#!/usr/bin/env bash
# Instructions the server executes per transaction, under valgrind's
# callgrind: repeatable where wall-clock A/B runs on a shared 2-vCPU
# machine are not (CPU steal moves TPS by 10-30% between runs).
#
#   bench/serve-callgrind.sh QUILL_BINARY [TEST] [TRANSACTIONS]
#
# Starts `QUILL serve` under callgrind on a fresh directory, prepares a
# 2,000-row sysbench table, warms up with 200 transactions, runs a
# CHECKPOINT (background page writes out of the window), zeroes the
# counters, runs TRANSACTIONS (default 2000) of TEST (default
# oltp_update_non_index) from one sysbench thread, dumps, and prints the
# instructions per transaction and the dump's path (open it with
# callgrind_annotate). Compare two binaries by running it for each.
#
# THREADS=N runs the measured transactions from N sysbench connections
# (default 1); with THREADS > 1 the window opens only once every
# connection has started (its startup and prepares are not counted) and
# lasts TRANSACTIONS seconds, counted by the server's own commit counter. CACHE_SIM=1 also simulates the caches (a 64 KiB L1d and,
# as these vCPUs report, a 1 MiB last level: one core's view, since
# valgrind runs one thread at a time) and prints misses per transaction:
# how the working set grows with the number of connections.
# SB_ARGS adds sysbench run options (e.g. "--rand-type=uniform").
#   THREADS=1024 CACHE_SIM=1 bench/serve-callgrind.sh target/release/quill
set -euo pipefail
quill=$(realpath "$1")
test=${2:-oltp_update_non_index}
n=${3:-2000}
out=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
threads=${THREADS:-1}
sim=()
if [ "${CACHE_SIM:-0}" = 1 ]; then
  # LL_BYTES / D1_BYTES change the simulated sizes (e.g. LL_BYTES=33554432
  # for the 32 MiB L3 these hosts share, D1_BYTES=32768 for their L1d).
  sim=(--cache-sim=yes --D1="${D1_BYTES:-65536},8,64" --I1=65536,8,64 --LL="${LL_BYTES:-1048576},16,64")
fi
ulimit -n 8192
valgrind --tool=callgrind "${sim[@]}" --callgrind-out-file="$out/cg.out" "$quill" serve --dir "$out/data" \
  --listen "127.0.0.1:$port" > "$out/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 200); do
  python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null && break
  sleep 0.5
done
sb=(--db-driver=pgsql --pgsql-host=127.0.0.1 --pgsql-port="$port" --pgsql-user=sbtest
    --pgsql-db=sbtest --tables=1 --table-size=2000)
sysbench "$test" "${sb[@]}" prepare > /dev/null
sysbench "$test" "${sb[@]}" --threads=1 --events=200 --time=0 run > /dev/null
# Write the pages prepare dirtied now, so a background flush does not land
# in one binary's window and not the other's.
psql -X -q -h 127.0.0.1 -p "$port" -U sbtest -d sbtest -c CHECKPOINT > /dev/null
callgrind_control -z "$pid" > /dev/null
commits() {
  psql -X -At -h 127.0.0.1 -p "$port" -U sbtest -d sbtest -c 'SHOW quill.status' |
    awk -F'|' '$1 == "txn.commits" {print $2}'
}
# shellcheck disable=SC2086 # SB_ARGS is a list of flags
if [ "$threads" = 1 ]; then
  sysbench "$test" "${sb[@]}" --threads=1 --events="$n" --time=0 ${SB_ARGS:-} run > /dev/null
  callgrind_control -d "$pid" > /dev/null
else
  secs=$n
  sysbench "$test" "${sb[@]}" --threads="$threads" --time=$((secs + 600)) ${SB_ARGS:-} run > "$out/sysbench.txt" 2>&1 &
  sbpid=$!
  until grep -q "Threads started" "$out/sysbench.txt"; do sleep 1; done
  sleep 5
  c0=$(commits)
  callgrind_control -z "$pid" > /dev/null
  sleep "$secs"
  callgrind_control -d "$pid" > /dev/null
  c1=$(commits)
  kill "$sbpid" 2>/dev/null || true
  n=$((c1 - c0))
fi
sleep 1
total=$(callgrind_annotate "$out/cg.out.1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}')
echo "$test, $threads connections: $total instructions over $n transactions = $((total / n)) per transaction ($out/cg.out.1)"
if [ "${CACHE_SIM:-0}" = 1 ]; then
  # The totals line, without its "(100.0%)" columns: Ir Dr Dw I1mr D1mr
  # D1mw ILmr DLmr DLmw (the order callgrind records them in).
  callgrind_annotate "$out/cg.out.1" 2>/dev/null | awk -v n="$n" '/PROGRAM TOTALS/ {
    gsub(/\([^)]*\)/, ""); for (i = 1; i <= 9; i++) gsub(",", "", $i);
    printf "per transaction: L1d misses %.0f, last-level data misses %.0f (reads %.0f, writes %.0f), L1i misses %.0f, last-level instruction misses %.0f\n",
      ($5 + $6) / n, ($8 + $9) / n, $8 / n, $9 / n, $4 / n, $7 / n }'
fi
