#!/usr/bin/env bash
# Instructions per read (or per insert) under callgrind, for each build
# given: the figures bench/results/oltp.md and insert.md quote for issue 15
# items 3 and 4.
#   bash bench/qr100-callgrind.sh NAME=BINARY [NAME=BINARY ...]
# KIND=qr (default): per qr100 query (Quill's 10-row secondary-index reads,
#   the bench's QuillOps::index_range and what it calls); 100k-row table,
#   l.i0, l.x, then qr100 for 3 s.
# KIND=ro: per sysbench read-only transaction (10 point selects and 4
#   100-row range reads, QuillOps' Ops methods); one 20k-row table, 3 s.
# KIND=li0: per l.i0 insert (QuillOps::insert and what it calls: the
#   engine's part of a row, not the harness building it nor the commit
#   every 100 rows); 100k rows, big transactions, 1 client.
# KIND=upd: per sysbench update-non-index update (QuillOps::update and
#   what it calls: the engine's row read, undo and write, not the
#   transaction's begin and commit); one 20k-row table, 1 thread, 3 s.
# DIR (default /tmp/read-cg) scratch. Collection is switched on while a
# read runs; each thread's instructions go to a file of their own
# (--separate-threads), and only the client's (the thread that made the
# calls counted) are: the page cleaner and purge, also running
# meanwhile, are not.
# (Until 2026-11-27 the script counted every thread while collection was
# on: read-only figures moved by 15% from run to run of one build, as
# the cleaner's work after the load fell in or out; the figures recorded
# before then were counted so.)
set -euo pipefail
DIR=${DIR:-/tmp/read-cg}
KIND=${KIND:-qr}
for nb in "$@"; do
  name=${nb%%=*}; bin=${nb#*=}
  rm -rf "$DIR"; mkdir -p "$DIR"
  case "$KIND" in
    qr)
      valgrind --tool=callgrind --callgrind-out-file="$DIR/cg" --separate-threads=yes \
        --toggle-collect='*QuillOps*index_range*' "$bin" bench insert --dir "$DIR/db" \
        --engines quill --clients 1 --total-rows 100000 --txn-sizes big --steps l.i0,l.x,qr100 \
        --seconds 3 --warmup 0 --json "$DIR/run.json" > /dev/null 2>&1
      what="qr100 query" ;;
    ro)
      valgrind --tool=callgrind --callgrind-out-file="$DIR/cg" --separate-threads=yes \
        --toggle-collect='*QuillOps*as*quill_bench::engine::Ops*' "$bin" bench oltp \
        --dir "$DIR/db" --engines quill --tables 1 --table-size 20000 --threads 1 \
        --shapes read-only --seconds 3 --warmup 0 --json "$DIR/run.json" > /dev/null 2>&1
      what="read-only transaction" ;;
    li0)
      valgrind --tool=callgrind --callgrind-out-file="$DIR/cg" --separate-threads=yes \
        --toggle-collect='*QuillOps*as*Ops>::insert*' "$bin" bench insert --dir "$DIR/db" \
        --engines quill --clients 1 --total-rows 100000 --txn-sizes big --steps l.i0 \
        --seconds 3 --warmup 0 --json "$DIR/run.json" > /dev/null 2>&1
      what="l.i0 insert" ;;
    upd)
      valgrind --tool=callgrind --callgrind-out-file="$DIR/cg" --separate-threads=yes \
        --toggle-collect='*QuillOps*as*Ops>::update*' "$bin" bench oltp \
        --dir "$DIR/db" --engines quill --tables 1 --table-size 20000 --threads 1 \
        --shapes update-non-index --seconds 3 --warmup 0 --json "$DIR/run.json" > /dev/null 2>&1
      what="update-non-index update" ;;
    *) echo "KIND is qr, ro, li0 or upd, not $KIND" >&2; exit 2 ;;
  esac
  # The reads are counted by callgrind itself, as calls into the collected
  # functions (qr: index_range; ro: pk_range, four per transaction; li0:
  # insert), not from the run's JSON: under valgrind the client's last reads fall after
  # the measured window, and counting from the window's figures moved the
  # result by up to 30% from run to run of one build (until 2026-11-29).
  # (annotate to a file first: grep -m1 stopping early would kill the
  # pipe, and pipefail the script)
  case "$KIND" in
    qr) callee='Ops>::index_range'; per=1 ;;
    ro) callee='Ops>::pk_range'; per=4 ;;
    li0) callee='Ops>::insert'; per=1 ;;
    upd) callee='Ops>::update'; per=1 ;;
  esac
  total=0; calls=0
  for f in "$DIR"/cg-*; do
    callgrind_annotate --inclusive=yes --tree=calling "$f" > "$DIR/cg.txt" 2>/dev/null
    # (a thread with nothing collected prints "." for its total)
    t=$(grep -m1 'PROGRAM TOTALS' "$DIR/cg.txt" | awk '{gsub(",","",$1); print ($1 ~ /^[0-9]+$/) ? $1 : 0}')
    # "  N (P%)  >   file:...Ops>::index_range (CALLSx) [binary]", once
    # per caller
    # (no match is 0 calls, not the end of the script under pipefail)
    c=$({ grep -F "$callee (" "$DIR/cg.txt" || true; } | { grep -E '^ *[0-9,]+ .* > ' || true; } \
      | sed -E 's/.*\(([0-9,]+)x\).*/\1/; s/,//g' | awk '{s += $1} END {print s + 0}')
    # The client is the thread that made the calls counted, not the
    # busiest one: the load before the reads (ro, upd: the table's
    # inserts, also through QuillOps) can take as many instructions
    # (until 2026-12-01 the busiest thread was taken).
    if [ "${c:-0}" -gt "$calls" ]; then
      total=${t:-0}
      calls=$c
    fi
  done
  python3 - "$total" "$calls" "$per" "$name" "$what" <<'PY'
import sys
total, calls, per, name, what = sys.argv[1:6]
n = int(calls) / int(per)
if n == 0:
    sys.exit(f"{name}: no {what} was counted")
print(f"{name}: {int(total) / n:,.0f} instructions per {what} ({n:.0f} of them)")
PY
done
rm -rf "$DIR"
