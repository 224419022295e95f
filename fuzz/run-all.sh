#!/usr/bin/env bash
# Run every fuzz target (or the ones named) for SECONDS each with
# cargo-fuzz (libFuzzer, AddressSanitizer, debug assertions and overflow
# checks), one after the other, and print a markdown table: the command,
# the runs executed, the corpus at the end (files and bytes) and the
# outcome. A crash, a leak, an input that runs over 10 s (-timeout) and
# more than 2 GiB of memory (-rss_limit_mb, -malloc_limit_mb) all fail.
#
#   fuzz/run-all.sh 600                 # the 10-minute runs of issue 13
#   fuzz/run-all.sh 30 page undo_record # two targets, briefly
#
# Needs a nightly toolchain (`rustup toolchain install nightly`) and
# cargo-fuzz (`cargo install cargo-fuzz`). Each target's corpus grows in
# fuzz/corpus/<target>/ (not committed) from the committed seeds in
# fuzz/seeds/<target>/ (with fuzz/dicts/<target>.dict where there is
# one); findings land in fuzz/artifacts/<target>/ and the libFuzzer output
# in fuzz/logs/<target>.log. Exit status 1 if any target failed.
set -uo pipefail
cd "$(dirname "$0")"

if [ $# -lt 1 ] || ! [[ "$1" =~ ^[0-9]+$ ]]; then
  echo "usage: $0 SECONDS [TARGET...]" >&2
  exit 2
fi
seconds=$1
shift
if [ $# -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(cargo +nightly fuzz list)
fi

cargo +nightly fuzz build -a >&2 || exit 1
mkdir -p logs corpus

echo "| target | command | runs | corpus files | corpus bytes | result |"
echo "| --- | --- | ---: | ---: | ---: | --- |"
failed=0
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "seeds/$t"
  cmd=(cargo +nightly fuzz run -a "$t" "corpus/$t" "seeds/$t" --
       "-max_total_time=$seconds" -timeout=10 -rss_limit_mb=2048
       -malloc_limit_mb=2048 -print_final_stats=1)
  if [ -f "dicts/$t.dict" ]; then
    cmd+=("-dict=dicts/$t.dict")
  fi
  echo "== $t: ${cmd[*]}" >&2
  "${cmd[@]}" >"logs/$t.log" 2>&1
  status=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "logs/$t.log" | grep -o '[0-9]*$' | tail -1)
  files=$(find "corpus/$t" -type f | wc -l)
  bytes=$(find "corpus/$t" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
  if [ "$status" -eq 0 ]; then
    result=ok
  else
    result="FAILED (exit $status; see fuzz/logs/$t.log and fuzz/artifacts/$t/)"
    failed=1
  fi
  echo "| $t | \`${cmd[*]}\` | ${runs:-?} | $files | $bytes | $result |"
done
exit $failed
