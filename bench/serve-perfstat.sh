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
# shellcheck source=bench/serve-pinned.sh
. "$(dirname "$0")/serve-pinned.sh"
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
