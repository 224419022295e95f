#!/usr/bin/env bash
# Instructions per scanned row of a SELECT through `quill serve`, under
# callgrind, for each build given: the per-row counts bench/results/serve.md
# quotes for issue 15 item 4 ("Scans copy a leaf once, and expressions
# read values where they lie").
#   bash bench/sql-scan-callgrind.sh NAME=BINARY [NAME=BINARY ...]
# ROWS (default 100000) rows of (id bigint primary key, k int, pad text of
# 300 bytes) are loaded once through psql by the first binary; each build
# then serves a copy under valgrind with collection on only inside
# `quill_sql::select::run`, and QUERY (default `select max(id) from t`)
# runs twice. Prints, per build, the instructions collected, those in
# libc's memcpy (valgrind counts each byte a `rep movsb` moves as one
# instruction, so a 16 KiB page copy counts 16,000: compare the figures
# outside memcpy, and time the copy with bench/sql-scan-ab.sh), and both
# per scanned row. DIR (default /tmp/sql-scan-cg) scratch; PORT (55460).
set -euo pipefail
ROWS=${ROWS:-100000}; QUERY=${QUERY:-select max(id) from t}
DIR=${DIR:-/tmp/sql-scan-cg}; PORT=${PORT:-55460}
[ "$#" -ge 1 ] || { echo "give at least one NAME=BINARY" >&2; exit 2; }
for t in psql valgrind callgrind_annotate python3; do
  command -v "$t" > /dev/null || { echo "needs $t" >&2; exit 2; }
done
rm -rf "$DIR"; mkdir -p "$DIR"
sql() { PGPASSWORD=x psql -X -q -h 127.0.0.1 -p "$PORT" -U u -d d "$@"; }
up() { for _ in $(seq 120); do sql -c 'select 1' > /dev/null 2>&1 && return; sleep 0.5; done
  echo "server did not start: $(cat "$DIR/server.log")" >&2; exit 1; }
down() { pkill -INT -f -- "--listen 127.0.0.1:$PORT" || true
  for _ in $(seq 60); do pgrep -f -- "--listen 127.0.0.1:$PORT" > /dev/null || return 0; sleep 0.5; done; }
trap down EXIT
python3 "$(dirname "$0")/sql-scan-load.py" "$ROWS" > "$DIR/load.sql"
first=${1#*=}
"$first" serve --dir "$DIR/load" --listen "127.0.0.1:$PORT" --pool 256M > "$DIR/server.log" 2>&1 &
up; sql -f "$DIR/load.sql" > /dev/null; down
echo "query: $QUERY, run twice over $ROWS rows ($((2 * ROWS)) rows scanned)"
for nb in "$@"; do
  name=${nb%%=*}; bin=${nb#*=}
  rm -rf "$DIR/db"; cp -r "$DIR/load" "$DIR/db"; rm -f "$DIR"/cg.out.*
  valgrind --tool=callgrind --callgrind-out-file="$DIR/cg.out.%p" --collect-atstart=no \
    --toggle-collect='quill_sql::select::run*' \
    "$bin" serve --dir "$DIR/db" --listen "127.0.0.1:$PORT" --pool 256M > "$DIR/server.log" 2>&1 &
  up; sql -At -c "$QUERY" -c "$QUERY" > /dev/null; down
  callgrind_annotate "$DIR"/cg.out.* 2> /dev/null > "$DIR/$name.txt"
  python3 - "$DIR/$name.txt" "$name" "$ROWS" <<'PY'
import re, sys
text, name, rows = open(sys.argv[1]).read(), sys.argv[2], 2 * int(sys.argv[3])
num = lambda s: int(s.replace(",", ""))
total = num(re.search(r"([\d,]+) \([^)]*\)\s+PROGRAM TOTALS", text).group(1))
memcpy = sum(num(m.group(1)) for m in re.finditer(r"^\s*([\d,]+) \([^)]*\)\s+\S*mem(?:cpy|move)\S*", text, re.M))
print(f"{name}: {total:,} instructions ({total / rows:,.0f} per row), {memcpy:,} in memcpy; "
      f"{total - memcpy:,} outside it ({(total - memcpy) / rows:,.0f} per row)")
PY
done
