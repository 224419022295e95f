#!/usr/bin/env bash
# Where the clients of the A/B (run.sh) wait in a slow window: the same
# busy loops, then each build's 1-thread delete and update-non-index
# windows alone (`quill bench oltp`, 5 s), and after each the engine's own
# counters from `quill status` (saved at the clean close): the durable log
# write's latency, commit waits, log holes (an appender, such as purge,
# that reserved log space and has not filled it), descents that waited
# for a busy page, and row-lock waits. From the repository root:
#   bash bench/results/oltp-20261203-purge-nice/diag.sh BASE NICE0 OUT.txt [ROUNDS]
set -euo pipefail
BASE=${1:?BASE}; NICE0=${2:?NICE0}; OUT=${3:?OUT}; ROUNDS=${4:-2}
DIR=${DIR:-/tmp/purge-nice-diag}
source bench/host.sh
trap 'busy_loops_stop; rm -rf "$DIR"' EXIT
busy_loops_start
echo "# bash bench/results/oltp-20261203-purge-nice/diag.sh $BASE $NICE0 $OUT $ROUNDS; $(date -u +%FT%TZ)" > "$OUT"
for r in $(seq 1 "$ROUNDS"); do
  for b in "nice19=$BASE" "nice0=$NICE0"; do
    name=${b%%=*}; bin=${b#*=}
    rm -rf "$DIR"
    echo "== round $r, $name" >> "$OUT"
    "$bin" bench oltp --dir "$DIR" --engines quill --shapes delete,update-non-index --threads 1 \
      --seconds 5 --warmup 1 | grep -E '^quill +(delete|update)' | awk '{print $2, $4 " tps, p50", $9, "us, p99", $11, "us"}' >> "$OUT"
    "$bin" status "$DIR/quill" | grep -E 'durable I/O latency|commit wait|stalls:|row locks:' \
      | sed 's/^ *//' >> "$OUT"
    "$bin" status "$DIR/quill" | grep -o '[0-9]* descents waited for a busy page' >> "$OUT"
  done
done
cat "$OUT"
