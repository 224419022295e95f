#!/usr/bin/env bash
# The log's own share of the 1-client excess over the floor: rounds of the
# floor (as in ../run.sh), then `quill bench commit` at 1 client (append a
# 350-byte record, about an update-non-index transaction's redo, and commit
# it durably, in a loop: the log path alone, no B+tree, no undo), then the
# floor again. From the repository root:
#   bash bench/results/oltp-20261203-floor/log-only/run.sh QUILL OUTDIR [ROUNDS]
set -euo pipefail
Q=${1:?QUILL}; OUT=${2:?OUTDIR}; ROUNDS=${3:-3}
DIR=${DIR:-/tmp/oltp-floor-log}
mkdir -p "$OUT"
trap 'rm -rf "$DIR"' EXIT
source bench/host.sh
host_start
floor() { # floor ROUND WHEN (bench/host.sh)
  durable_write_floor "$Q" "$DIR/fsync" "$OUT/fsync-$1-$2"
}
for r in $(seq 1 "$ROUNDS"); do
  floor "$r" before
  rm -rf "$DIR/commit"
  "$Q" bench commit --dir "$DIR/commit" --clients 1 --seconds 5 --warmup 1 \
    --record-bytes 350 --log-file-size 1G --json "$OUT/commit-$r.json" > "$OUT/commit-$r.txt" 2>&1
  floor "$r" after
done
host_end "$OUT"
rm -rf "$DIR"
