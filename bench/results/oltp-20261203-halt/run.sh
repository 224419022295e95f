#!/usr/bin/env bash
# Whether the floor of a durable commit on this host, and the 1-thread
# write shapes above it, depend on the virtual CPUs halting while the
# commit's write is in flight. Each round runs two conditions, in turn:
#   idle: the host as the acceptance scripts find it;
#   busy: one busy loop per CPU at nice 19 (it yields the CPU to any
#         runnable thread of the engines, at nice 0, but keeps the CPU
#         from going idle, so from halting).
# In each: the floor before (bench/host.sh), Quill and SQLite at 1 thread
# on update-non-index and delete, the floor after. Each condition's
# directory reads back with `python3 bench/oltp-floor.py OUTDIR/COND`.
# From the repository root, with a build that has the peers:
#   bash bench/results/oltp-20261203-halt/run.sh QUILL OUTDIR [ROUNDS]
set -euo pipefail
Q=${1:?QUILL}; OUT=${2:?OUTDIR}; ROUNDS=${3:-3}
DIR=${DIR:-/tmp/oltp-halt}
mkdir -p "$OUT/idle" "$OUT/busy"
source bench/host.sh
trap 'busy_loops_stop; rm -rf "$DIR"' EXIT
{ date -u; nproc; uname -r; lsblk -d -o NAME,ROTA,SIZE,MODEL 2>/dev/null
  echo "cpuidle: $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null)," \
    "guest_halt_poll_ns: $(cat /sys/module/haltpoll/parameters/guest_halt_poll_ns 2>/dev/null)"
  echo "block device interrupts by CPU:"; grep -E 'virtio[0-9]+-req' /proc/interrupts || true
} > "$OUT/machine.txt"
git rev-parse --short HEAD > "$OUT/commit.txt"  # HEAD of the checkout this runs from
host_start
for r in $(seq 1 "$ROUNDS"); do
  for cond in idle busy; do
    if [ "$cond" = busy ]; then busy_loops_start; fi
    durable_write_floor "$Q" "$DIR/fsync" "$OUT/$cond/fsync-$r-before"
    rm -rf "$DIR/oltp"
    "$Q" bench oltp --dir "$DIR/oltp" --engines quill,sqlite --threads 1 \
      --shapes update-non-index,delete --seconds 5 --warmup 1 \
      --json "$OUT/$cond/oltp-$r.json" > "$OUT/$cond/oltp-$r.txt" 2>&1
    durable_write_floor "$Q" "$DIR/fsync" "$OUT/$cond/fsync-$r-after"
    busy_loops_stop
  done
done
host_end "$OUT"
