#!/usr/bin/env bash
# The sysbench-shaped comparison of bench/results/oltp.md in one run: Quill,
# SQLite and RocksDB, every shape at 1, 4, 16 and 64 threads, all engines
# loaded first and then run in turn per shape and thread count (so a noisy
# stretch of the host falls on all of them).
#   bash bench/oltp-acceptance.sh [DIR] [OUT]
# DIR: directory on the file system to measure (default ./quill-bench)
# OUT: where results go (default bench/results/oltp-<date>)
# SECONDS_PER_RUN (default 5) and THREADS (default 1,4,16,64) shorten a trial.
# Before and after the engines, the floor of a durable commit on this host
# (one 4 KiB write made durable, each sync method; fsync-before/after.json),
# which bench/oltp-floor.py sets beside the 1-thread write shapes.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-quill-bench}
OUT=${2:-bench/results/oltp-$(date -u +%Y%m%d)}
SECS=${SECONDS_PER_RUN:-5}
THREADS=${THREADS:-1,4,16,64}
mkdir -p "$OUT"
cargo build --release --quiet -p quill-cli --features peers
Q=./target/release/quill
. bench/host.sh
host_start
git rev-parse HEAD > "$OUT/commit.txt"
set -x
durable_write_floor $Q "$DIR/fsync" "$OUT/fsync-before"
$Q bench oltp --dir "$DIR/oltp" --engines quill,sqlite,rocksdb \
  --tables 8 --table-size 100000 --threads "$THREADS" --seconds "$SECS" --warmup 1 \
  --json "$OUT/oltp.json" | tee "$OUT/oltp.txt"
durable_write_floor $Q "$DIR/fsync" "$OUT/fsync-after"
$Q bench report "$OUT/oltp.json"
python3 bench/oltp-floor.py "$OUT" | tee "$OUT/floor.txt"
set +x
host_end "$OUT"
