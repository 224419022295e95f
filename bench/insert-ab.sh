#!/usr/bin/env bash
# A/B of Quill builds on Insert Benchmark steps, big transactions, 2M
# rows: for each round and client count, each build in turn runs on a
# fresh database, so builds interleave. Prints one line per run.
#   bash bench/insert-ab.sh WHAT ROUNDS CLIENTS NAME=BINARY [NAME=BINARY ...]
# WHAT=qr100: l.i0, l.x, then 10 s of qr100 after 2 s of warm-up; prints
#   round, clients, name, queries/s, CPU us per query.
# WHAT=load: l.i0 then l.x; prints round, clients, name, l.i0 rows/s and
#   CPU us per row, l.x rows/s and CPU us per row.
# CPU is getrusage of the whole process. e.g.
#   bash bench/insert-ab.sh qr100 3 1,4 base=/tmp/quill-base new=target/release/quill
# DIR (default /tmp/insert-ab) is the scratch directory.
set -euo pipefail
if [ $# -lt 4 ]; then
  sed -n 2,13p "$0" >&2
  exit 2
fi
WHAT=$1; ROUNDS=$2; CLIENTS=$3; shift 3
case "$WHAT" in
  qr100) steps=l.i0,l.x,qr100 ;;
  load) steps=l.i0,l.x ;;
  *) echo "WHAT is qr100 or load, not $WHAT" >&2; exit 2 ;;
esac
DIR=${DIR:-/tmp/insert-ab}
# rows/s (or q/s) and CPU us per op of one step's line in the table
col() { grep " $1 " <<<"$2" | awk -v q="$3" '{print (q ? $7 : $6), $12}'; }
for r in $(seq "$ROUNDS"); do
  for cl in ${CLIENTS//,/ }; do
    for nb in "$@"; do
      name=${nb%%=*}; bin=${nb#*=}
      rm -rf "$DIR"
      out=$("$bin" bench insert --dir "$DIR" --engines quill --clients "$cl" \
        --txn-sizes big --steps "$steps" --seconds 10 --warmup 2 2>&1)
      if [ "$WHAT" = qr100 ]; then
        echo "$r $cl $name $(col qr100 "$out" 1)"
      else
        echo "$r $cl $name $(col l.i0 "$out" 0) $(col l.x "$out" 0)"
      fi
    done
  done
done
rm -rf "$DIR"
