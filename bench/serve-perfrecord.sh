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
# shellcheck source=bench/serve-pinned.sh
. "$(dirname "$0")/serve-pinned.sh"
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
