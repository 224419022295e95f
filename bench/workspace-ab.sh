#!/usr/bin/env bash
# Interleaved A/B of `quill bench oltp` (Quill alone, 1 and 64 threads,
# all eight shapes) between a binary built before the workspace split
# (issue 14 part 1) and this tree's: the engine now reaches the benchmark
# code, and the benchmark the engine, across a crate boundary.
#   [SHAPES=delete] [THREADS=64] bash bench/workspace-ab.sh BASE_QUILL [ROUNDS] [OUT]
# BASE_QUILL: `quill` built from the commit before the split, e.g.
# `git worktree add /tmp/wt-pre 363a1c4 && (cd /tmp/wt-pre && cargo build --release)`.
# Rounds alternate which binary runs first; check_workspace_ab.py prints
# medians and new/base ratios per shape and thread count.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${1:?usage: workspace-ab.sh BASE_QUILL [ROUNDS] [OUT]}
ROUNDS=${2:-2}
OUT=${3:-bench/results/workspace-ab-$(date +%Y%m%d)}
NEW=target/release/quill
cargo build --release -q
mkdir -p "$OUT"
SCRATCH=$(mktemp -d /var/tmp/quill-ab.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
. bench/host.sh
host_start
run() { # name binary round
  local name=$1 q=$2 r=$3
  "$q" bench oltp --dir "$SCRATCH/$name-oltp" --engines quill --threads "${THREADS:-1,64}" \
    --shapes "${SHAPES:-point-select,read-only,read-write,write-only,update-index,update-non-index,insert,delete}" \
    --seconds 10 --warmup 2 --json "$OUT/$name-oltp-r$r.json" > /dev/null
  rm -rf "$SCRATCH/$name-oltp"
}
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then run base "$BASE" "$r"; run new "$NEW" "$r";
  else run new "$NEW" "$r"; run base "$BASE" "$r"; fi
  echo "round $r done"
done
host_end "$OUT"
python3 bench/check_workspace_ab.py "$OUT"
