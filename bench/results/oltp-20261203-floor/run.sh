#!/usr/bin/env bash
# How close the 1-thread write shapes sit to the floor a durable commit has
# on this host: each round measures one durable 4 KiB write (the floor: the
# least any engine that makes each commit durable before acknowledging it
# must wait, with one client nobody to share the sync with), then Quill and
# SQLite at 1 thread on the three 1-thread shapes below their margins, then
# the floor again. `python3 bench/oltp-floor.py OUTDIR` reads it back.
# From the repository root:
#   bash bench/results/oltp-20261203-floor/run.sh QUILL OUTDIR [ROUNDS]
set -euo pipefail
Q=${1:?QUILL}; OUT=${2:?OUTDIR}; ROUNDS=${3:-3}
DIR=${DIR:-/tmp/oltp-floor}
mkdir -p "$OUT"
trap 'rm -rf "$DIR"' EXIT
source bench/host.sh
{ date -u; nproc; uname -r; lsblk -d -o NAME,ROTA,SIZE,MODEL 2>/dev/null;
  cat /sys/block/vda/queue/fua /sys/block/vda/queue/write_cache 2>/dev/null; } > "$OUT/machine.txt"
git rev-parse --short HEAD > "$OUT/commit.txt"  # HEAD of the checkout this runs from
host_start
floor() { # floor ROUND WHEN (bench/host.sh)
  durable_write_floor "$Q" "$DIR/fsync" "$OUT/fsync-$1-$2"
}
for r in $(seq 1 "$ROUNDS"); do
  floor "$r" before
  rm -rf "$DIR/oltp"
  "$Q" bench oltp --dir "$DIR/oltp" --engines quill,sqlite --threads 1 \
    --shapes update-index,update-non-index,delete --seconds 5 --warmup 1 \
    --json "$OUT/oltp-$r.json" > "$OUT/oltp-$r.txt" 2>&1
  floor "$r" after
done
host_end "$OUT"
rm -rf "$DIR"
