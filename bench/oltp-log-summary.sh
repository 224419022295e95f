#!/usr/bin/env bash
# Where one sysbench shape's log bytes go: run the shape on a small table
# (so the load is a small part of the log), kill the process after SECS
# seconds so the log since its checkpoint stays, and sum it up with
# `quill dump --summary` (records and bytes per redo operation).
#   bash bench/oltp-log-summary.sh QUILL SHAPE OUT [SECS]
# e.g. bash bench/oltp-log-summary.sh target/release/quill update-non-index \
#   bench/results/oltp-20261127-update-ab/dump-summary-bt1.txt
# (what oltp.md's "a root of level 1 keeps its leaf" quotes: 1 thread,
# one 10,000-row table, killed after 25 s).
set -euo pipefail
Q=${1:?QUILL}; SHAPE=${2:?SHAPE}; OUT=${3:?OUT}; SECS=${4:-25}
DIR=${DIR:-/tmp/oltp-log-summary}
rm -rf "$DIR"
# The kill is the point (a clean close would checkpoint the log away).
( timeout -s KILL "$SECS" "$Q" bench oltp --dir "$DIR" --tables 1 --table-size 10000 \
  --threads 1 --shapes "$SHAPE" --seconds 600 --warmup 1 > /dev/null 2>&1 ) 2> /dev/null || true
"$Q" dump --summary "$DIR/quill" > "$OUT" 2>&1
cat "$OUT"
rm -rf "$DIR"
