#!/usr/bin/env bash
# How this directory's A/Bs ran (2026-12-03), from the repository root.
# Builds (release, `cargo build --release -p quill-cli --features peers`):
#   base      = 8a86f1b
#   condyield = 37f6437 (this directory's condyield.patch on 8a86f1b)
#   yield     = 3d36c3d, noyield = 3d36c3d plus
#               ../oltp-20261203-yield-ab/noyield/noyield.patch (yield removed)
# Each A/B wrote to a scratch directory, copied here afterwards as named.
set -euo pipefail
A=/work/bins/quill-8a86f1b; B=/work/bins/quill-condyield
busy() { # run "$@" with two busy loops at nice 19 beside it
  local pids=()
  for _ in 1 2; do nice -n 19 bash -c 'while :; do :; done' & pids+=($!); done
  "$@" || true
  kill "${pids[@]}"
}
# busy-noyield/ (13:27-13:33 UTC), copied from /tmp/spinab/bg:
busy env ROUNDS=2 SECS=8 ENGINES=quill,sqlite bash bench/oltp-ab.sh /tmp/spinab/bg \
  update-non-index,delete 1 yield=/work/bins/quill-3d36c3d noyield=/work/bins/quill-noyield
# quiet-3rounds/ (idle host), copied from /tmp/cy/quiet:
ROUNDS=3 SECS=8 ENGINES=quill bash bench/oltp-ab.sh /tmp/cy/quiet \
  update-non-index,delete,insert 1,4,16 base=$A condyield=$B
# busy/, copied from /tmp/cy/busy:
busy env ROUNDS=3 SECS=8 ENGINES=quill,sqlite bash bench/oltp-ab.sh /tmp/cy/busy \
  update-non-index,delete 1 base=$A condyield=$B
# quiet-5rounds/ (idle host), copied from /tmp/cy2/quiet1:
ROUNDS=5 SECS=8 ENGINES=quill bash bench/oltp-ab.sh /tmp/cy2/quiet1 \
  update-non-index,delete,insert 1 base=$A condyield=$B
# fsync.txt:
bash bench/results/oltp-20261203-busy-host/run-fsync.sh $B
