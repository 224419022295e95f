#!/usr/bin/env bash
# `quill bench scan` for each build given, the builds alternating, RUNS
# times (default 3): read-ahead and scan figures of builds compared on
# one host stretch (bench/results/scan-20261129c/).
#   bash bench/scan-ab.sh OUT NAME=BINARY [NAME=BINARY ...]
# Writes OUT/NAME-RUN.txt and .json; ROUNDS (default 5) is passed on as
# --rounds; DIR (default /tmp/scan-ab) scratch, one subdirectory a build.
set -euo pipefail
OUT=${1:?OUT}; shift
RUNS=${RUNS:-3}; ROUNDS=${ROUNDS:-5}; DIR=${DIR:-/tmp/scan-ab}
[ "$#" -ge 1 ] || { echo "give at least one NAME=BINARY" >&2; exit 2; }
mkdir -p "$OUT"
for r in $(seq "$RUNS"); do
  for nb in "$@"; do
    name=${nb%%=*}; bin=${nb#*=}
    "$bin" bench scan --dir "$DIR/$name" --rounds "$ROUNDS" --json "$OUT/$name-$r.json" > "$OUT/$name-$r.txt" 2>&1
    grep -E '^(forward|backward) +on' "$OUT/$name-$r.txt" | sed "s/^/run $r $name: /"
  done
done
