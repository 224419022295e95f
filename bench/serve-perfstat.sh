#!/usr/bin/env bash
# Per-transaction counts of what the server does under sysbench: CPU
# (user and system, from /proc; sysbench's own CPU too, and the host's
# idle and steal time over the window), context switches, wakeups and the
# syscalls of the commit and network paths (sendto, recvfrom, futex,
# epoll_wait, fdatasync, ...), counted by `perf stat` on the server's
# process over the middle of each run. Server on CPU 1 and sysbench on
# CPU 0 (SERVER_PIN / CLIENT_PIN override, "" for none).
#
#   bench/serve-perfstat.sh QUILL OUT_DIR SECONDS THREADS...
#   TEST=oltp_read_write bench/serve-perfstat.sh target/release/quill /tmp/ps 30 64 1024
#   SERVE_ARGS="--fsync-delay-ms 5" bench/serve-perfstat.sh ...   (a slow device)
#   SB_ARGS="--rand-type=uniform" bench/serve-perfstat.sh ...      (sysbench run options)
#
# Writes OUT_DIR/run-K-THREADS.{sysbench,perf,cpu}.txt and prints a table
# (and OUT_DIR/summary.json) from bench/serve_perfstat.py. Needs perf
# (Debian's linux-perf) with the syscalls tracepoints readable.
set -euo pipefail
quill=$(realpath "$1"); out=$2; secs=$3; shift 3
test=${TEST:-oltp_update_non_index}
spin=${SERVER_PIN-taskset -c 1}; cpin=${CLIENT_PIN-taskset -c 0}
mkdir -p "$out"
ulimit -n 8192
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# shellcheck disable=SC2086 # SERVE_ARGS is a list of flags
$spin "$quill" serve --dir "$dir/data" --listen "127.0.0.1:$port" ${SERVE_ARGS:-} > "$out/server.log" 2>&1 &
spid=$!
trap 'kill $spid 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.2; done
sb=(--db-driver=pgsql --pgsql-host=127.0.0.1 --pgsql-port="$port" --pgsql-user=sbtest
    --pgsql-db=sbtest --tables=1 --table-size=10000)
sysbench "$test" "${sb[@]}" prepare > /dev/null
events=task-clock,context-switches,cpu-migrations,sched:sched_wakeup
for s in futex epoll_wait recvfrom sendto read write writev sched_yield fdatasync pwrite64; do
  events+=",syscalls:sys_enter_$s"
done
k=0
for n in "$@"; do
  k=$((k + 1))
  # shellcheck disable=SC2086 # SB_ARGS is a list of flags
  $cpin sysbench "$test" "${sb[@]}" --threads="$n" --time="$secs" --report-interval=0 ${SB_ARGS:-} run \
    > "$out/run-$k-$n.sysbench.txt" 2>&1 &
  cpid=$!
  sleep 3
  before=$(awk '{print $14, $15}' /proc/$spid/stat)
  cbefore=$(awk '{print $14, $15}' /proc/$cpid/stat)
  host0=$(awk '/^cpu /{print $5, $9}' /proc/stat)
  perf stat -e "$events" -p "$spid" -o "$out/run-$k-$n.perf.txt" -- sleep $((secs - 6)) 2>/dev/null
  echo "$before $(awk '{print $14, $15}' /proc/$spid/stat) $(getconf CLK_TCK)" > "$out/run-$k-$n.cpu.txt"
  # sysbench's CPU and the host's idle and steal ticks over the same window.
  echo "$cbefore $(awk '{print $14, $15}' /proc/$cpid/stat) $host0 $(awk '/^cpu /{print $5, $9}' /proc/stat)" \
    > "$out/run-$k-$n.host.txt"
  wait $cpid
done
python3 "$(dirname "$0")/serve_perfstat.py" "$out"
