#!/usr/bin/env bash
# The Insert Benchmark comparison of bench/results/insert.md in one run:
# Quill, SQLite and RocksDB, 1 and 4 clients, big and small transactions,
# every step (l.i0, l.x, l.i1, l.i2, qr100, qp100).
#   bash bench/insert-acceptance.sh [DIR] [OUT]
# DIR: directory on the file system to measure (default ./quill-bench)
# OUT: where results go (default bench/results/insert-<date>)
# SECONDS_PER_RUN (default 10) and TOTAL_ROWS (default 2000000) shorten a trial.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-quill-bench}
OUT=${2:-bench/results/insert-$(date -u +%Y%m%d)}
SECS=${SECONDS_PER_RUN:-10}
ROWS=${TOTAL_ROWS:-2000000}
mkdir -p "$OUT"
cargo build --release --quiet -p quill-cli --features peers
Q=./target/release/quill
. bench/host.sh
host_start
git rev-parse HEAD > "$OUT/commit.txt"
set -x
$Q bench insert --dir "$DIR/insert" --engines quill,sqlite,rocksdb \
  --clients 1,4 --total-rows "$ROWS" --txn-sizes big,small \
  --steps l.i0,l.x,l.i1,l.i2,qr100,qp100 --seconds "$SECS" --warmup 2 \
  --json "$OUT/insert.json" | tee "$OUT/insert.txt"
$Q bench report "$OUT/insert.json"
set +x
host_end "$OUT"
