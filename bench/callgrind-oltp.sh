#!/usr/bin/env bash
# Instructions per committed transaction of one sysbench shape at one
# thread, measured by callgrind with instrumentation switched on after the
# load (the figures of bench/results/oltp.md, runs 20-22):
#   bash bench/callgrind-oltp.sh BINARY NAME [SHAPE] [DELAY_S] [SECONDS]
# writes /tmp/callgrind-oltp/NAME.out and prints total instructions,
# transactions (calls of Ctx::commit) and their ratio. DELAY_S (default 8)
# must exceed the load's time without instrumentation; raise it when the
# host is busy. Needs valgrind.
set -euo pipefail
BIN=$1; NAME=$2; SHAPE=${3:-write-only}; DELAY=${4:-8}; SECS=${5:-30}
OUT=/tmp/callgrind-oltp
mkdir -p "$OUT"; rm -rf "$OUT/db-$NAME"
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$OUT/$NAME.out" \
  "$BIN" bench oltp --dir "$OUT/db-$NAME" --tables 2 --table-size 10000 --threads 1 \
  --shapes "$SHAPE" --seconds "$SECS" --warmup 2 > "$OUT/$NAME.txt" 2>&1 &
PID=$!
sleep "$DELAY"
callgrind_control -i on "$PID" > /dev/null
wait "$PID"
TOTAL=$(callgrind_annotate --auto=no "$OUT/$NAME.out" | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}')
TX=$(callgrind_annotate --inclusive=yes --tree=caller --auto=no "$OUT/$NAME.out" \
  | grep -E "< .*quill::db::txn::Ctx::commit \(" | head -1 | sed 's/.*(\([0-9,]*\)x).*/\1/' | tr -d ,)
echo "$NAME: $TOTAL instructions, $TX transactions, $((TOTAL / TX)) per transaction"
