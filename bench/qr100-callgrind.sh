#!/usr/bin/env bash
# Instructions per qr100 query (Quill's 10-row secondary-index reads, the
# bench's QuillOps::index_range and what it calls) under callgrind, for
# each build given: the figure bench/results/oltp.md and insert.md quote
# for issue 15 item 4 (234,861 before, 127,574 after).
#   bash bench/qr100-callgrind.sh NAME=BINARY [NAME=BINARY ...]
# DIR (default /tmp/qr100-cg) scratch. 100k-row table, l.i0, l.x, then
# qr100 for 3 s. Collection is switched on for the whole process while a
# query runs, so other threads' work in that time is counted too.
set -euo pipefail
DIR=${DIR:-/tmp/qr100-cg}
for nb in "$@"; do
  name=${nb%%=*}; bin=${nb#*=}
  rm -rf "$DIR"; mkdir -p "$DIR"
  valgrind --tool=callgrind --callgrind-out-file="$DIR/qr.cg" \
    --toggle-collect='*QuillOps*index_range*' "$bin" bench insert --dir "$DIR/db" \
    --engines quill --clients 1 --total-rows 100000 --txn-sizes big --steps l.i0,l.x,qr100 \
    --seconds 3 --warmup 0 --json "$DIR/qr.json" > /dev/null 2>&1
  total=$(callgrind_annotate "$DIR/qr.cg" 2>/dev/null | grep -m1 'PROGRAM TOTALS' | awk '{gsub(",","",$1); print $1}')
  python3 - "$DIR/qr.json" "$total" "$name" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
q = sum(r["queries_per_sec"] * r["seconds"] for r in rows if r["step"] == "qr100")
print(f"{sys.argv[3]}: {int(sys.argv[2]) / q:,.0f} instructions per qr100 query ({q:.0f} queries)")
PY
done
rm -rf "$DIR"
