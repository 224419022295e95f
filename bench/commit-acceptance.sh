#!/usr/bin/env bash
# Reproduces every figure of bench/results/commit.md in one run:
#   bash bench/commit-acceptance.sh [DIR] [OUT]
# DIR: directory on the file system to measure (default ./quill-bench;
#      each benchmark uses a subdirectory of its own)
# OUT: where JSON results go (default bench/results/commit-<date>)
# Then checks the acceptance criteria with bench/check_commit.py.
#
# The machines are shared and noisy (the same row varies by +-20% between
# minutes), so single-client ratios are measured in rounds that alternate a
# short `bench fsync` (the physical limit) with the 1-client commit rows, and
# the checker takes the median of the per-round ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-quill-bench}
OUT=${2:-bench/results/commit-$(date -u +%Y%m%d)}
S=${SECONDS_PER_ROW:-3}
ROUNDS=${ROUNDS:-5}
mkdir -p "$OUT"
cargo build --release --quiet
Q=./target/release/quill
. bench/host.sh
host_start
set -x
$Q bench fsync --dir "$DIR/fsync" --iterations 1000 --rounds 3 --buffered --json "$OUT/fsync.json"
for i in $(seq 1 "$ROUNDS"); do
  $Q bench fsync --dir "$DIR/fsync" --iterations 2000 --rounds 1 --preparations overwrite,rewrite --json "$OUT/round$i-fsync.json"
  $Q bench commit --dir "$DIR/commit" --clients 1 --mode leader,flusher,naive --seconds "$S" --json "$OUT/round$i-modes.json"
  $Q bench commit --dir "$DIR/commit" --clients 1 --async true --seconds "$S" --json "$OUT/round$i-async.json"
done
$Q bench commit --dir "$DIR/commit" --clients 4,16,64,256 --mode leader,flusher,naive \
  --seconds "$S" --repeat 3 --json "$OUT/modes.json"
$Q bench commit --dir "$DIR/commit" --clients 64 --async false,true --seconds "$S" --repeat 3 --json "$OUT/async.json"
$Q bench commit --dir "$DIR/commit" --clients 1,4,16,64,256 --mode leader,flusher,naive --fsync-delay-ms 5 \
  --seconds "$S" --repeat 2 --json "$OUT/slow.json"
$Q bench commit --dir "$DIR/commit" --clients 1,16,64 --durability write,lazy --seconds "$S" --json "$OUT/durability.json"
set +x
host_end "$OUT"
python3 bench/check_commit.py "$OUT"
