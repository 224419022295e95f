#!/usr/bin/env bash
# Range scans over a tree larger than the buffer pool, read-ahead on and
# off interleaved in one run (bench/results/storage.md, "Read-ahead").
#   bash bench/scan-acceptance.sh [DIR] [OUT]
# DIR: directory on the file system to measure (default ./quill-bench)
# OUT: where results go (default bench/results/scan-<date>)
# ROWS (default 2000000) and ROUNDS (default 5) shorten a trial.
# With fio installed, the device's own figures for 16 KiB and 128 KiB
# (read-ahead's largest request) O_DIRECT sequential reads at 1, 4 and 8
# in flight follow, in OUT/fio.txt.
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
if command -v fio > /dev/null; then
  F="$DIR/fio-read-test"
  fio --name=fill --filename="$F" --size=512m --rw=write --bs=1m --direct=1 \
    --ioengine=psync > /dev/null
  for bs in 16 128; do
    for qd in 1 4 8; do
      echo "$bs KiB O_DIRECT sequential reads, $qd in flight (fio libaio --iodepth=$qd, 5 s):"
      fio --name=read --filename="$F" --size=512m --rw=read --bs="${bs}k" --direct=1 \
        --ioengine=libaio --iodepth="$qd" --runtime=5 --time_based | grep -E '^ +READ:'
    done
  done | tee "$OUT/fio.txt"
  rm -f "$F"
fi
host_end "$OUT"
