#!/usr/bin/env bash
# Does the purge thread at nice 19 give 1-thread clients millisecond
# stalls when other nice-19 work shares the CPUs (the tail of busy round 3
# in ../oltp-20261203-halt/)? One busy loop per CPU at nice 19, pinned,
# for the whole A/B; inside it, bench/oltp-ab.sh with the engine as built
# (purge at nice 19) and with PURGE_NICE = 0, Quill alone, update-non-index
# and delete at 1 thread. From the repository root:
#   bash bench/results/oltp-20261203-purge-nice/run.sh BASE NICE0 OUT [ROUNDS]
set -euo pipefail
BASE=${1:?BASE}; NICE0=${2:?NICE0}; OUT=${3:?OUT}; ROUNDS=${4:-5}
source bench/host.sh
trap 'busy_loops_stop' EXIT
busy_loops_start
ROUNDS=$ROUNDS SECS=5 bash bench/oltp-ab.sh "$OUT" update-non-index,delete 1 \
  nice19="$BASE" nice0="$NICE0"
