#!/usr/bin/env bash
# A/B of builds on chosen sysbench shapes: each build's `quill bench oltp`
# run in turn, ROUNDS times, so a noisy stretch of the host falls on all
# of them; compare medians (OUT/medians.txt, from the rounds' JSON by
# bench/oltp-ab-medians.py).
#   bash bench/oltp-ab.sh OUT SHAPES THREADS NAME=BINARY [NAME=BINARY ...]
# e.g. bash bench/oltp-ab.sh bench/results/oltp-20261127-update-ab \
#   update-non-index,update-index,write-only 1,16 before=/tmp/a after=/tmp/b
# (binaries built with `cargo build --release -p quill-cli --features peers`
# and copied out). ROUNDS (default 3), DIR (default /tmp/oltp-ab) scratch,
# TABLES (8), TABLE_SIZE (100000), SECS (10), WARMUP (1), ENGINES (quill;
# e.g. quill,sqlite runs the peers in each round too, and the medians
# give each build's Quill/peer ratio, the median of the rounds' ratios;
# it must include quill).
set -euo pipefail
OUT=${1:?OUT}; SHAPES=${2:?SHAPES}; THREADS=${3:?THREADS}; shift 3
ROUNDS=${ROUNDS:-3}; DIR=${DIR:-/tmp/oltp-ab}; ENGINES=${ENGINES:-quill}
TABLES=${TABLES:-8}; TABLE_SIZE=${TABLE_SIZE:-100000}; SECS=${SECS:-10}; WARMUP=${WARMUP:-1}
case ",$ENGINES," in
  *,quill,*) ;;
  *) echo "ENGINES must include quill (the A/B compares Quill builds), not $ENGINES" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
# The medians are read from every NAME-ROUND.json in OUT: refuse to mix
# in another A/B's rounds.
if compgen -G "$OUT/*-[0-9]*.json" > /dev/null; then
  echo "$OUT already holds an A/B's rounds (NAME-ROUND.json); give an empty or new OUT" >&2
  exit 2
fi
stat() { grep '^cpu ' /proc/stat; }
{ echo "date: $(date -u +%FT%TZ)"; echo "nproc: $(nproc)"; echo "kernel: $(uname -r)";
  echo "disk: $(df -h "$(dirname "$DIR")" | tail -1)"; echo "cpu before: $(stat)";
  echo "builds: $*"; echo "engines: $ENGINES"
  echo "shapes: $SHAPES; threads: $THREADS; $TABLES x $TABLE_SIZE rows; $SECS s after $WARMUP s"; } > "$OUT/host.txt"
for round in $(seq "$ROUNDS"); do
  for nb in "$@"; do
    name=${nb%%=*}; bin=${nb#*=}
    "$bin" bench oltp --dir "$DIR" --engines "$ENGINES" --tables "$TABLES" --table-size "$TABLE_SIZE" \
      --threads "$THREADS" --shapes "$SHAPES" --seconds "$SECS" --warmup "$WARMUP" \
      --json "$OUT/$name-$round.json" > "$OUT/$name-$round.txt" 2>&1
    grep -E '^(quill|sqlite|rocksdb) +[a-z-]+ +[0-9]+ ' "$OUT/$name-$round.txt" | sed "s/^/round $round $name: /"
  done
done | tee "$OUT/ab.txt"
{ echo "date after: $(date -u +%FT%TZ)"; echo "cpu after: $(stat)"; } >> "$OUT/host.txt"
python3 "$(dirname "$0")/oltp-ab-medians.py" "$OUT" | tee "$OUT/medians.txt"
rm -rf "$DIR"
