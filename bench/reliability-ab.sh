#!/usr/bin/env bash
# Interleaved A/B of the commit path and of transactions, between a
# baseline binary and this tree's: what issue 13's changes (the log's
# durability hint, the assertions on hot paths, the directory lock) cost.
#   bash bench/reliability-ab.sh BASE_QUILL [ROUNDS] [OUT]
# BASE_QUILL: a `quill` binary built from the baseline commit (for example
# `git worktree add /tmp/base 2b6975f && cargo build --release` there).
# Each round runs both binaries, in alternating order, on the same
# workloads; check_reliability_ab.py prints medians and ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${1:?usage: reliability-ab.sh BASE_QUILL [ROUNDS] [OUT]}
ROUNDS=${2:-5}
OUT=${3:-bench/results/reliability-ab-$(date +%Y%m%d)}
NEW=target/release/quill
cargo build --release -q
mkdir -p "$OUT"
SCRATCH=$(mktemp -d /var/tmp/quill-ab.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
. bench/host.sh
host_start
run() { # name binary round
  local name=$1 q=$2 r=$3
  "$q" bench commit --dir "$SCRATCH/$name-commit" --clients 1,16,64 --seconds 3 --warmup 0.5 \
    --json "$OUT/$name-commit-r$r.json" > /dev/null
  "$q" bench txn --dir "$SCRATCH/$name-txn" --tables 4 --table-size 50000 --threads 1,16 \
    --workload update-non-index,point-select --seconds 5 --warmup 1 \
    --json "$OUT/$name-txn-r$r.json" > /dev/null
  rm -rf "$SCRATCH/$name-commit" "$SCRATCH/$name-txn"
}
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then run base "$BASE" "$r"; run new "$NEW" "$r";
  else run new "$NEW" "$r"; run base "$BASE" "$r"; fi
  echo "round $r done"
done
host_end "$OUT"
python3 bench/check_reliability_ab.py "$OUT"
