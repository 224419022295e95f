#!/usr/bin/env bash
# Where the halt costs: one durable 4 KiB write (`quill bench fsync`,
# rewrite + RWF_DSYNC, direct) with the writing thread pinned to each CPU
# in turn, and a busy loop at nice 19 pinned to no CPU, to the CPU that
# takes the block device's interrupts, or to the other. Rounds interleave
# the combinations. From the repository root:
#   bash bench/results/oltp-20261203-halt/pinned.sh QUILL OUT.txt [ROUNDS]
set -euo pipefail
Q=${1:?QUILL}; OUT=${2:?OUT}; ROUNDS=${3:-3}
DIR=${DIR:-/tmp/oltp-halt-pinned}
source bench/host.sh
trap 'busy_loops_stop; rm -rf "$DIR"' EXIT
{ echo "# bash bench/results/oltp-20261203-halt/pinned.sh $(basename "$Q") $OUT $ROUNDS"
  echo "# $(date -u +%FT%TZ), kernel $(uname -r), $(nproc) CPUs; block device interrupts by CPU:"
  grep -E 'virtio[0-9]+-req' /proc/interrupts | sed 's/^/# /' || true
  echo "round writer_cpu spinner_cpu p50_us p99_us"
} > "$OUT"
for r in $(seq 1 "$ROUNDS"); do
  for spin in none 0 1; do
    if [ "$spin" != none ]; then busy_loops_start "$spin"; fi
    for w in 0 1; do
      rm -rf "$DIR"
      line=$(taskset -c "$w" "$Q" bench fsync --dir "$DIR" --iterations 3000 --rounds 1 \
        --preparations rewrite --methods rwf_dsync | grep '^rewrite')
      echo "$r $w $spin $(echo "$line" | awk '{print $5, $6}')" >> "$OUT"
    done
    busy_loops_stop
  done
done
cat "$OUT"
