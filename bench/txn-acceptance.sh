#!/usr/bin/env bash
# Reproduces the figures of bench/results/txn.md in one run:
#   bash bench/txn-acceptance.sh [DIR] [OUT]
# DIR: directory on the file system to measure (default ./quill-bench;
#      each benchmark uses a subdirectory of its own)
# OUT: where JSON results go (default bench/results/txn-<date>)
# Then checks the acceptance criteria with bench/check_txn.py.
# SECONDS_PER_RUN (default 10) shortens the runs for a trial.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-quill-bench}
OUT=${2:-bench/results/txn-$(date -u +%Y%m%d)}
SECS=${SECONDS_PER_RUN:-10}
mkdir -p "$OUT"
cargo build --release --quiet
Q=./target/release/quill
. bench/host.sh
host_start
set -x
# sysbench shapes: 8 tables x 100k rows, durable (Sync) commits,
# 1 to 256 client threads.
$Q bench txn --dir "$DIR/txn" --tables 8 --table-size 100000 \
  --threads 1,4,16,64,256 --workload update-non-index,point-select \
  --seconds "$SECS" --warmup 2 --json "$OUT/txn.json" | tee "$OUT/txn.txt"
# "64 threads not slower than 4" is a comparison of two noisy figures:
# measure it as five interleaved pairs (4, 64, 4, 64, ...) and compare
# the medians.
$Q bench txn --dir "$DIR/txn-ps" --tables 8 --table-size 100000 \
  --threads 4,64,4,64,4,64,4,64,4,64 --workload point-select \
  --seconds 4 --warmup 1 --json "$OUT/point-select-pairs.json" | tee "$OUT/point-select-pairs.txt"
set +x
host_end "$OUT"
python3 bench/check_txn.py "$OUT"
