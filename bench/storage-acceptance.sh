#!/usr/bin/env bash
# Reproduces every figure of bench/results/storage.md in one run:
#   bash bench/storage-acceptance.sh [DIR] [OUT]
# DIR: directory on the file system to measure (default ./quill-bench;
#      each benchmark uses a subdirectory of its own)
# OUT: where JSON results go (default bench/results/storage-<date>)
# Then checks the acceptance criteria with bench/check_storage.py.
# STALL_SECONDS (default 600) and TORTURE_SECONDS (default 600) shorten
# the two long parts for a trial run.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-quill-bench}
OUT=${2:-bench/results/storage-$(date -u +%Y%m%d)}
STALL=${STALL_SECONDS:-600}
TORTURE=${TORTURE_SECONDS:-600}
mkdir -p "$OUT"
cargo build --release --quiet
Q=./target/release/quill
. bench/host.sh
host_start
set -x
# 1M rows in key order, 120-byte values, a durable commit per 100 rows.
$Q bench storage --dir "$DIR/storage" --workload inorder --rows 1000000 --json "$OUT/inorder.json"
# 2M random rows into a tree that grows to >10x a 32 MiB pool.
$Q bench storage --dir "$DIR/storage" --workload random --random-rows 2000000 --random-pool 32M --json "$OUT/random.json"
# Recovery with 1 GiB of log to replay.
$Q bench storage --dir "$DIR/storage" --workload recovery --recovery-log 1G --json "$OUT/recovery.json"
# A long run with a 32 MiB log: constant checkpoints; longest commit.
$Q bench storage --dir "$DIR/storage" --workload stall --stall-seconds "$STALL" --stall-log 32M --json "$OUT/stall.json"
# Real-process crash test.
$Q torture --dir "$DIR/torture" --seconds "$TORTURE" --seed 20261122 > "$OUT/torture.txt"
tail -1 "$OUT/torture.txt"
set +x
host_end "$OUT"
python3 bench/check_storage.py "$OUT"
