#!/usr/bin/env bash
# Reproduces every figure of bench/results/commit.md in one run:
#   bash bench/commit-acceptance.sh [DIR] [OUT]
# DIR: directory on the file system to measure (default ./quill-data)
# OUT: where JSON results go (default bench/results/commit-<date>)
# Then checks the acceptance criteria with bench/check_commit.py.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-quill-data}
OUT=${2:-bench/results/commit-$(date -u +%Y%m%d)}
SECONDS_PER_ROW=${SECONDS_PER_ROW:-3}
REPEAT=${REPEAT:-3}
mkdir -p "$OUT"
cargo build --release --quiet
Q=./target/release/quill
set -x
$Q bench fsync --dir "$DIR" --iterations 1000 --rounds 3 --buffered --json "$OUT/fsync.json"
$Q bench commit --dir "$DIR" --clients 1,4,16,64,256 --mode leader,flusher,naive \
  --seconds "$SECONDS_PER_ROW" --repeat "$REPEAT" --json "$OUT/modes.json"
$Q bench commit --dir "$DIR" --clients 1,64 --async false,true \
  --seconds "$SECONDS_PER_ROW" --repeat "$REPEAT" --json "$OUT/async.json"
$Q bench commit --dir "$DIR" --clients 1,4,16,64,256 --mode leader,flusher,naive --fsync-delay-ms 5 \
  --seconds "$SECONDS_PER_ROW" --repeat 2 --json "$OUT/slow.json"
$Q bench commit --dir "$DIR" --clients 1,16,64 --durability write,lazy \
  --seconds "$SECONDS_PER_ROW" --repeat 1 --json "$OUT/durability.json"
$Q bench fsync --dir "$DIR" --iterations 1000 --rounds 3 --json "$OUT/fsync-after.json"
set +x
python3 bench/check_commit.py "$OUT"
