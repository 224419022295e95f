#!/usr/bin/env bash
# A/B of Quill builds on the Insert Benchmark's qr100 step, big
# transactions: for each round and client count, each build in turn loads
# a fresh 2M-row database (l.i0, l.x) and runs qr100 for 10 s after 2 s of
# warm-up. Prints one line per run: round, clients, build name, queries
# per second, CPU microseconds per query (getrusage of the process).
#   bash bench/qr100-ab.sh ROUNDS CLIENTS NAME=BINARY [NAME=BINARY ...]
# e.g. bash bench/qr100-ab.sh 3 1,4 base=/tmp/quill-base new=target/release/quill
# DIR (default /tmp/qr100-ab) is the scratch directory.
set -euo pipefail
if [ $# -lt 3 ]; then
  sed -n 2,9p "$0" >&2
  exit 2
fi
ROUNDS=$1; shift
CLIENTS=$1; shift
DIR=${DIR:-/tmp/qr100-ab}
for r in $(seq "$ROUNDS"); do
  for cl in ${CLIENTS//,/ }; do
    for nb in "$@"; do
      name=${nb%%=*}; bin=${nb#*=}
      rm -rf "$DIR"
      line=$("$bin" bench insert --dir "$DIR" --engines quill --clients "$cl" \
        --txn-sizes big --steps l.i0,l.x,qr100 --seconds 10 --warmup 2 2>&1 | grep ' qr100 ')
      echo "$r $cl $name $(echo "$line" | awk '{print $7, $12}')"
    done
  done
done
rm -rf "$DIR"
