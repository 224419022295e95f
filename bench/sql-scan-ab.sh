#!/usr/bin/env bash
# Whole-table SELECTs through `quill serve` and psql, builds given as
# binaries, interleaved: the SQL layer's cost per scanned row (issue 15
# item 4, "decode only the columns it needs").
#   bash bench/sql-scan-ab.sh OUT NAME=BINARY [NAME=BINARY ...]
# ROWS (default 700000) rows of (id bigint primary key, k int, pad text of
# 300 bytes), loaded once by the first binary through psql in statements
# of 1,000 rows; each binary then serves its own copy with a 1 GiB pool
# (the table, 264 MB, stays cached after a first untimed pass of every
# query). ROUNDS (default 7) rounds; in each, every query runs once on
# every server, the order of the servers turning from round to round.
# Times are psql's \timing (client-observed, ms). DIR (default
# /tmp/sql-scan-ab) scratch; PORT (default 55440) the first server's port.
# Writes OUT/times.json and prints the median per query and build.
set -euo pipefail
OUT=${1:?OUT}; shift
ROWS=${ROWS:-700000}; ROUNDS=${ROUNDS:-7}
DIR=${DIR:-/tmp/sql-scan-ab}; PORT=${PORT:-55440}
declare -a NAMES BINS
for nb in "$@"; do NAMES+=("${nb%%=*}"); BINS+=("${nb#*=}"); done
[ "${#NAMES[@]}" -ge 1 ] || { echo "give at least one NAME=BINARY" >&2; exit 2; }
command -v psql > /dev/null || { echo "needs psql (apt-get install postgresql-client)" >&2; exit 2; }
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
. bench/host.sh
host_start
rm -rf "$DIR"; mkdir -p "$DIR"
PIDS=()
stop_all() { for p in "${PIDS[@]}"; do kill -INT "$p" 2> /dev/null || true; done; wait || true; PIDS=(); }
trap stop_all EXIT
sql() { PGPASSWORD=x psql -X -q -h 127.0.0.1 -p "$1" -U u -d d "${@:2}"; }
serve() { # serve BIN DIR PORT
  "$1" serve --dir "$2" --listen "127.0.0.1:$3" --pool 1G > "$2.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do sql "$3" -c 'select 1' > /dev/null 2>&1 && return; sleep 0.1; done
  echo "server $1 on port $3 did not start: $(cat "$2.log")" >&2; exit 1
}
python3 bench/sql-scan-load.py "$ROWS" > "$DIR/load.sql"
echo "loading $ROWS rows with ${NAMES[0]}"
serve "${BINS[0]}" "$DIR/load" "$PORT"
sql "$PORT" -f "$DIR/load.sql" > /dev/null
stop_all
for i in "${!NAMES[@]}"; do
  cp -r "$DIR/load" "$DIR/${NAMES[$i]}"
  serve "${BINS[$i]}" "$DIR/${NAMES[$i]}" $((PORT + 1 + i))
done
QUERIES=(
  "select count(*), sum(length(pad)) from t"
  "select count(*) from t where k = 7"
  "select max(id) from t"
  "select k, count(*) from t group by k order by k limit 3"
)
for q in "${QUERIES[@]}"; do
  for i in "${!NAMES[@]}"; do sql $((PORT + 1 + i)) -c "$q" > /dev/null; done
done
: > "$DIR/times.tsv"
n=${#NAMES[@]}
for round in $(seq "$ROUNDS"); do
  for qi in "${!QUERIES[@]}"; do
    for k in $(seq 0 $((n - 1))); do
      i=$(((k + round) % n))
      ms=$(sql $((PORT + 1 + i)) -At -c '\timing on' -c "${QUERIES[$qi]}" | awk '/^Time:/{print $2}')
      printf '%s\t%s\t%s\t%s\n' "$round" "$qi" "${NAMES[$i]}" "$ms" >> "$DIR/times.tsv"
    done
  done
done
stop_all
python3 - "$DIR/times.tsv" "$OUT/times.json" "$ROWS" "${NAMES[*]}" "${QUERIES[@]}" <<'EOF'
import json, statistics, sys
tsv, out, rows, names, queries = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(), sys.argv[5:]
times = {}
for line in open(tsv):
    r, q, name, ms = line.split("\t")
    times.setdefault(int(q), {}).setdefault(name, []).append(float(ms))
res = []
print(f"median ms over {len(times[0][names[0]])} rounds, {rows} rows:")
for qi, q in enumerate(queries):
    med = {n: statistics.median(times[qi][n]) for n in names}
    print(f"  {q}")
    print("    " + "  ".join(f"{n} {med[n]:.1f}" for n in names))
    res.append({"query": q, "rounds_ms": times[qi], "median_ms": med})
json.dump({"rows": rows, "queries": res}, open(out, "w"), indent=1)
EOF
host_end "$OUT"
