#!/usr/bin/env bash
# Borrowed (`Db::begin`, `Txn<'db>`) against owned (`Db::begin_owned`,
# `OwnedTxn`) transactions (issue 14 part 2), and both against a binary
# built before the change: `quill bench txn` point-select and
# update-non-index at 1, 16 and 64 threads, the three interleaved in
# every round, the order rotating.
#   bash bench/owned-ab.sh BASE_QUILL [ROUNDS] [OUT]
# BASE_QUILL: `quill` from the commit before owned transactions, e.g.
# `git worktree add /tmp/wt-pre 363a1c4 && (cd /tmp/wt-pre && cargo build --release)`.
# check_owned_ab.py prints medians and ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${1:?usage: owned-ab.sh BASE_QUILL [ROUNDS] [OUT]}
ROUNDS=${2:-3}
OUT=${3:-bench/results/owned-ab-$(date +%Y%m%d)}
NEW=target/release/quill
cargo build --release -q
mkdir -p "$OUT"
SCRATCH=$(mktemp -d /var/tmp/quill-ab.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
. bench/host.sh
host_start
run() { # variant round
  local v=$1 r=$2 q=$NEW extra=()
  case $v in
    base) q=$BASE ;;
    owned) extra=(--owned) ;;
  esac
  "$q" bench txn --dir "$SCRATCH/$v" --tables 4 --table-size 50000 --threads 1,16,64 \
    --workload point-select,update-non-index --seconds 5 --warmup 1 "${extra[@]}" \
    --json "$OUT/$v-r$r.json" > /dev/null
  rm -rf "$SCRATCH/$v"
}
variants=(base borrowed owned)
for r in $(seq 1 "$ROUNDS"); do
  for k in 0 1 2; do
    run "${variants[$(( (r + k) % 3 ))]}" "$r"
  done
  echo "round $r done"
done
host_end "$OUT"
python3 bench/check_owned_ab.py "$OUT"
