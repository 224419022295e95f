#!/usr/bin/env bash
# How Quill's commits waited, by shape and client count: the oltp table's
# yield/c column and the JSON's leader_*_per_commit and parks_per_commit
# (added in 4703d9a). Quill alone: the figures are Quill's own counters.
# From the repository root:
#   bash bench/results/oltp-20261203-group-stats/run.sh QUILL OUTDIR
set -euo pipefail
Q=${1:?QUILL}; OUT=${2:?OUTDIR}
DIR=${DIR:-/tmp/oltp-group-stats}
mkdir -p "$OUT"
trap 'rm -rf "$DIR"' EXIT
source bench/host.sh
rm -rf "$DIR"
{ date -u; nproc; uname -r; lsblk -d -o NAME,ROTA,SIZE,MODEL 2>/dev/null; } > "$OUT/machine.txt"
host_start
"$Q" bench oltp --dir "$DIR" --engines quill --threads 1,4,16,64 \
  --shapes write-only,update-index,update-non-index,insert,delete \
  --seconds 5 --warmup 1 --json "$OUT/oltp.json" > "$OUT/oltp.txt" 2>&1
host_end "$OUT"
rm -rf "$DIR"
