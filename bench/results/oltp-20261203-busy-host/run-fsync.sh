#!/usr/bin/env bash
# What an idle vCPU costs a durable write on this host: the latency of one
# 4 KiB RWF_DSYNC write (O_DIRECT, rewriting one block, as a log does at one
# client) with the CPUs left idle between writes, and with two busy loops at
# nice 19 keeping both vCPUs from halting. Rounds interleave the two cases.
# Usage: bash run-fsync.sh [QUILL_BINARY]   (writes fsync-HHMM.txt beside itself)
set -euo pipefail
Q=${1:-./target/release/quill}
here=$(dirname "$0")
dir=$(mktemp -d /tmp/fsync-halt.XXXXXX)
pids=()
stop() { [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2> /dev/null || true; pids=(); }
trap 'stop; rm -rf "$dir"' EXIT
measure() {
  "$Q" bench fsync --dir "$dir/f" --preparations rewrite --methods rwf_dsync \
    --iterations 3000 --rounds 1 | grep -E '^rewrite'
}
exec > >(tee "$here/fsync-$(date -u +%H%M).txt")
echo "date: $(date -u +%FT%TZ); nproc $(nproc); kernel $(uname -r)"
echo "kernel command line: $(cat /proc/cmdline | cut -d' ' -f1-16)"
echo "columns: prep method direct samples p50_us p99_us max_us write_p50_us"
for round in 1 2 3; do
  row=$(measure)
  echo "round $round idle CPUs:   $row"
  for _ in 1 2; do nice -n 19 bash -c 'while :; do :; done' & pids+=($!); done
  sleep 0.3
  row=$(measure)
  echo "round $round busy (2 x nice 19): $row"
  stop
done
