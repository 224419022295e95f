#!/usr/bin/env bash
# A profile of Quill on one sysbench shape, embedded (`quill bench oltp`,
# Quill alone, 8 tables x 100,000 rows as the acceptance script loads):
# the shape runs 40 s; 25 s in (after the load), perf watches the process.
#   bash bench/oltp-profile.sh QUILL SHAPE THREADS OUT [MODE]
# MODE record (default): `perf record -F 2000 -g` for 12 s, then
#   OUT/report.txt holds the shares by thread and object and by thread and
#   symbol (shares of all samples).
# MODE trace: `perf trace` of the log's and data files' writes for 3 s,
#   then OUT/trace.txt holds the log's durable writes (pwritev2): their
#   durations and the gaps from one's end to the next's start (how long
#   the device waits for the next group commit).
# OUT/run.txt holds the run's own table (its rate was measured with perf
# watching), OUT/host.json the run's length and CPU steal (bench/host.sh).
# E.g. (bench/results/oltp-20261203-profiles/):
#   bash bench/oltp-profile.sh target/release/quill delete 1 /tmp/prof-del
#   bash bench/oltp-profile.sh target/release/quill insert 16 /tmp/trace-ins trace
set -euo pipefail
Q=$(realpath "${1:?QUILL}"); SHAPE=${2:?SHAPE}; THREADS=${3:?THREADS}; OUT=${4:?OUT}
MODE=${5:-record}
case "$MODE" in record|trace) ;; *) echo "MODE is record or trace, not $MODE" >&2; exit 2 ;; esac
DIR=${DIR:-/tmp/oltp-profile}
mkdir -p "$OUT"
rm -rf "$DIR"
. "$(dirname "$0")/host.sh"
host_start
"$Q" bench oltp --dir "$DIR" --engines quill --shapes "$SHAPE" --threads "$THREADS" \
  --seconds 40 --warmup 1 > "$OUT/run.txt" 2>&1 &
pid=$!
sleep 25
if ! kill -0 "$pid" 2> /dev/null; then
  echo "the run ended before perf could watch it; see $OUT/run.txt" >&2
  exit 1
fi
if [ "$MODE" = record ]; then
  perf record -F 2000 -g -p "$pid" -o "$OUT/perf.data" -- sleep 12 > /dev/null 2>&1
else
  perf trace -p "$pid" -e pwritev2,fdatasync,pwrite64 -o "$OUT/trace.raw" -- sleep 3 > /dev/null 2>&1 || true
fi
wait "$pid"
# OUT/host.json: the steal over the whole run, as the acceptance scripts keep it.
HOST=$(host_end "$OUT")
if [ "$MODE" = record ]; then
  { echo "# perf record -F 2000 -g for 12 s of: quill bench oltp --shapes $SHAPE --threads $THREADS"
    echo "# $(date -u +%FT%TZ), $(basename "$Q"), kernel $(uname -r); $HOST"
    echo "# by thread and object (shares of all samples)"
    perf report -i "$OUT/perf.data" --no-children --stdio -q -g none --sort comm,dso 2> /dev/null | head -10
    echo "# by thread and symbol"
    perf report -i "$OUT/perf.data" --no-children --stdio -q -g none --sort comm,sym 2> /dev/null | head -40
  } > "$OUT/report.txt"
  cat "$OUT/report.txt"
else
  python3 - "$OUT/trace.raw" "$SHAPE" "$THREADS" "$(date -u +%FT%TZ), kernel $(uname -r); $HOST" > "$OUT/trace.txt" <<'PY'
import re, statistics as st, sys
raw, shape, threads, host = sys.argv[1:5]
# "T ( D ms): comm/tid pwritev2(fd: F, ..., flags: 2) = N"; flags 2 is
# RWF_DSYNC, which only the log's commit writes use.
ev = []
for line in open(raw):
    m = re.match(r"\s*([\d.]+) \(\s*([\d.]+) ms\): \S+ pwritev2\(.*flags: (\d+)\) = (\d+)", line)
    if m and int(m[3]) & 2:
        ev.append((float(m[1]), float(m[2]), int(m[4])))
if len(ev) < 3:
    sys.exit(f"{raw}: fewer than 3 durable log writes traced")
dur = [e[1] * 1000 for e in ev]
gaps = [(b[0] - (a[0] + a[1])) * 1000 for a, b in zip(ev, ev[1:])]
q = lambda x: " / ".join(f"{st.quantiles(x, n=100)[k]:.0f}" for k in (9, 49, 89, 98))
print(f"# perf trace for 3 s of: quill bench oltp --shapes {shape} --threads {threads}")
print(f"# {host}")
print(f"durable log writes: {len(ev)}, {st.mean(e[2] for e in ev):.0f} bytes on average")
print(f"duration us p10 / p50 / p90 / p99: {q(dur)}")
print(f"gap to the next one's start us p10 / p50 / p90 / p99: {q(gaps)}")
PY
  cat "$OUT/trace.txt"
fi
grep '^quill  ' "$OUT/run.txt" || true
rm -rf "$DIR"
