#!/usr/bin/env bash
# Range scans over a tree larger than the buffer pool, read-ahead on and
# off interleaved in one run (bench/results/storage.md, "Read-ahead").
#   bash bench/scan-acceptance.sh [DIR] [OUT]
# DIR: directory on the file system to measure (default ./quill-bench)
# OUT: where results go (default bench/results/scan-<date>)
# ROWS (default 2000000) and ROUNDS (default 5) shorten a trial.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-quill-bench}
OUT=${2:-bench/results/scan-$(date -u +%Y%m%d)}
ROWS=${ROWS:-2000000}
ROUNDS=${ROUNDS:-5}
mkdir -p "$OUT"
cargo build --release --quiet -p quill-cli
Q=./target/release/quill
. bench/host.sh
host_start
git rev-parse HEAD > "$OUT/commit.txt"
set -x
$Q bench scan --dir "$DIR/scan" --rows "$ROWS" --rounds "$ROUNDS" --pool 64M \
  --json "$OUT/scan.json" | tee "$OUT/scan.txt"
set +x
host_end "$OUT"
