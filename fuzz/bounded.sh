#!/usr/bin/env bash
# A bounded libFuzzer run of the targets that decode client input (the
# wire protocol's messages, SQL text, COPY data), for CI: SECONDS each
# (default 30), starting from the committed seeds.
#
#   fuzz/bounded.sh            # wire, sql and copy_data for 30 s each
#   fuzz/bounded.sh 10 wire    # one target, briefly
#
# Unlike run-all.sh it needs no nightly toolchain and no cargo-fuzz: it
# builds the targets with the stable compiler and the coverage flags
# cargo-fuzz passes for `--sanitizer none` (libFuzzer comes with the
# libfuzzer-sys crate), with debug assertions and overflow checks on. No
# AddressSanitizer, so it finds panics, hangs and runaway memory, not
# out-of-bounds reads in unsafe code; the long runs with ASan are
# run-all.sh's. The corpus grows in a temporary directory and is thrown
# away; a finding is written to fuzz/artifacts/<target>/ and the run
# fails, printing the command that replays it.
set -euo pipefail
cd "$(dirname "$0")"

seconds=${1:-30}
if ! [[ "$seconds" =~ ^[0-9]+$ ]]; then
  echo "usage: $0 [SECONDS] [TARGET...]" >&2
  exit 2
fi
shift || true
if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=(wire sql copy_data)
fi

flags=(
  -Cpasses=sancov-module
  -Cllvm-args=-sanitizer-coverage-level=4
  -Cllvm-args=-sanitizer-coverage-inline-8bit-counters
  -Cllvm-args=-sanitizer-coverage-pc-table
  -Cllvm-args=-sanitizer-coverage-trace-compares
  -Cllvm-args=-sanitizer-coverage-stack-depth
  --cfg fuzzing
  -Cdebug-assertions
  -Coverflow-checks
)
target_dir=${FUZZ_TARGET_DIR:-target/bounded}
# An explicit --target keeps the flags off build scripts, which must not
# be instrumented (they would need libFuzzer's symbols to link).
triple=$(rustc -vV | sed -n 's/^host: //p')
bins=()
for t in "${targets[@]}"; do
  bins+=(--bin "$t")
done
echo "== building ${targets[*]} with libFuzzer coverage (stable toolchain)" >&2
RUSTFLAGS="${flags[*]}" cargo build --release --target "$triple" \
  --target-dir "$target_dir" "${bins[@]}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for t in "${targets[@]}"; do
  mkdir -p "$work/$t" "artifacts/$t"
  cmd=("$target_dir/$triple/release/$t" "$work/$t" "seeds/$t"
       "-max_total_time=$seconds" -timeout=10 -rss_limit_mb=2048
       -malloc_limit_mb=2048 -print_final_stats=1 "-artifact_prefix=artifacts/$t/")
  if [ -f "dicts/$t.dict" ]; then
    cmd+=("-dict=dicts/$t.dict")
  fi
  echo "== $t for ${seconds}s: ${cmd[*]}" >&2
  if ! "${cmd[@]}" >"$work/$t.log" 2>&1; then
    # The panic's message comes before its backtrace: show it first.
    grep -m 4 -A 2 "panicked at" "$work/$t.log" >&2 || true
    tail -25 "$work/$t.log" >&2
    echo "fuzz target $t failed; the input is in fuzz/artifacts/$t/ (replay: fuzz/$target_dir/$triple/release/$t FILE)" >&2
    exit 1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$t.log" | grep -o '[0-9]*$' | tail -1)
  echo "   $t: ${runs:-?} inputs, no failure" >&2
done
