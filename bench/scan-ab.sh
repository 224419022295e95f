#!/usr/bin/env bash
# Issue 15 item 4 (range scans that read a leaf in place): builds given as
# binaries, run in interleaved rounds, each round all three engines in one
# run: sysbench read-only, read-write and point-select at 1 thread, and the
# Insert Benchmark's l.i0, l.x, qr100 and qp100 at 1 client (big
# transactions).
#   bash bench/scan-ab.sh OUT NAME=BINARY [NAME=BINARY ...]
# ROUNDS (default 3) interleaved rounds; DIR (default /tmp/scan-ab) scratch.
# Each binary is `quill` built with `cargo build --release -p quill-cli
# --features peers` and copied out. bench/scan-ab-summary.py OUT sums up.
set -euo pipefail
OUT=${1:?OUT}; shift
ROUNDS=${ROUNDS:-3}; DIR=${DIR:-/tmp/scan-ab}
declare -a NAMES BINS
for nb in "$@"; do NAMES+=("${nb%%=*}"); BINS+=("${nb#*=}"); done
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
. bench/host.sh
host_start
for round in $(seq "$ROUNDS"); do
  for i in "${!NAMES[@]}"; do
    rm -rf "$DIR"; sync; sleep 1
    "${BINS[$i]}" bench oltp --dir "$DIR/oltp" --engines quill,sqlite,rocksdb --tables 2 \
      --table-size 100000 --threads 1 --shapes read-only,read-write,point-select --seconds 5 \
      --warmup 1 --json "$OUT/oltp-${NAMES[$i]}-$round.json" 2>&1 \
      | grep -E "^(quill|sqlite|rocksdb) " | sed "s/^/round $round ${NAMES[$i]}: /"
    rm -rf "$DIR"; sync; sleep 1
    "${BINS[$i]}" bench insert --dir "$DIR/insert" --engines quill,sqlite,rocksdb --clients 1 \
      --total-rows 1000000 --txn-sizes big --steps l.i0,l.x,qr100,qp100 --seconds 5 --warmup 1 \
      --json "$OUT/insert-${NAMES[$i]}-$round.json" 2>&1 \
      | grep -E "^(quill|sqlite|rocksdb) " | sed "s/^/round $round ${NAMES[$i]}: /"
  done
done | tee "$OUT/ab.txt"
host_end "$OUT"
rm -rf "$DIR"
python3 bench/scan-ab-summary.py "$OUT" | tee "$OUT/summary.txt"
