#!/usr/bin/env bash
# The l.i0 redo A/B of bench/results/insert.md ("Issue 15: where l.i0's log
# bytes go"): builds given as binaries, run interleaved, then all three
# engines on the last one, then each build's log summed up by
# `quill dump --summary`, then callgrind instruction counts.
#   bash bench/insert-redo-ab.sh OUT NAME=BINARY [NAME=BINARY ...]
# e.g. OUT=bench/results/insert-20261126-redo, base-arena=<quill at e0a71c0>,
# undo2=<quill at 2cafef1>, redo=<quill at 93cce41> (each built with
# `cargo build --release -p quill-cli --features peers` and copied out).
# ROUNDS (default 3) interleaved rounds; DIR (default /tmp/ib) scratch.
set -euo pipefail
OUT=${1:?OUT}; shift
ROUNDS=${ROUNDS:-3}; DIR=${DIR:-/tmp/ib}
declare -a NAMES BINS
for nb in "$@"; do NAMES+=("${nb%%=*}"); BINS+=("${nb#*=}"); done
LAST=${BINS[${#BINS[@]}-1]}
mkdir -p "$OUT"
stat() { grep '^cpu ' /proc/stat; }
{ echo "date: $(date -u +%FT%TZ)"; echo "nproc: $(nproc)"; echo "kernel: $(uname -r)";
  echo "disk: $(df -h "$(dirname "$DIR")" | tail -1)"; echo "cpu before: $(stat)"; } > "$OUT/host.txt"
for round in $(seq "$ROUNDS"); do
  for i in "${!NAMES[@]}"; do
    rm -rf "$DIR"; sync; sleep 1
    "${BINS[$i]}" bench insert --dir "$DIR" --engines quill --clients 1 --total-rows 1000000 \
      --steps l.i0 --txn-sizes big,small --json "$OUT/ab-${NAMES[$i]}-$round.json" 2>&1 \
      | grep "^quill  " | sed "s/^/round $round ${NAMES[$i]}: /"
  done
done | tee "$OUT/ab.txt"
echo "cpu after A/B: $(stat)" >> "$OUT/host.txt"
rm -rf "$DIR"
"$LAST" bench insert --dir "$DIR" --engines quill,rocksdb,sqlite --clients 1,4 --total-rows 1000000 \
  --steps l.i0 --txn-sizes big,small --json "$OUT/three-engines.json" > "$OUT/three-engines.txt" 2>&1
echo "cpu after three engines: $(stat)" >> "$OUT/host.txt"
# Where the log bytes go: a 3M-row load killed after 6 s leaves its log
# since the last checkpoint.
for i in "${!NAMES[@]}"; do
  rm -rf "$DIR"
  "${BINS[$i]}" bench insert --dir "$DIR" --engines quill --clients 1 --total-rows 3000000 \
    --steps l.i0 --keep > /dev/null 2>&1 & pid=$!
  sleep 6; kill -9 "$pid"; wait "$pid" 2>/dev/null || true
  "$LAST" dump --summary "$DIR/quill-big-1" > "$OUT/dump-summary-${NAMES[$i]}.txt" 2>&1
done
# Instructions: 100k rows, l.i0 big, 256 MiB pool, whole process.
for i in "${!NAMES[@]}"; do
  rm -rf "$DIR"
  valgrind --tool=callgrind --callgrind-out-file="$DIR.cg" "${BINS[$i]}" bench insert --dir "$DIR" \
    --engines quill --clients 1 --total-rows 100000 --steps l.i0 --txn-sizes big --pool 256M > /dev/null 2>&1
  echo "${NAMES[$i]}: $(callgrind_annotate "$DIR.cg" 2>/dev/null | grep -m1 'PROGRAM TOTALS')"
  rm -f "$DIR.cg"
done > "$OUT/callgrind-totals.txt"
rm -rf "$DIR"
