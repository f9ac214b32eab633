#!/usr/bin/env bash
# Runs every libFuzzer target of tests/fuzz/ for SECONDS seconds each (default 60):
#   tests/fuzz/run_fuzzers.sh [SECONDS] [TARGET...]
# Builds them with --config=fuzz (Debian's clang 14, libFuzzer, ASan, UBSan) in a Bazel
# output base of its own, starts each from a copy of its seed corpus
# (tests/fuzz/corpus/TARGET), and exits 1 when any target crashes, leaks, times out, runs
# out of memory or makes a sanitizer report, printing the reproducer's path (run
# bazel-bin/tests/fuzz/TARGET on it to replay). Ends with "N fuzzers passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/clang_output_base.sh

seconds=${1:-60}
shift || true
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "usage: tests/fuzz/run_fuzzers.sh [SECONDS] [TARGET...]" >&2
  exit 2
fi
if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for d in tests/fuzz/corpus/*/; do targets+=("$(basename "$d")"); done
fi

output_base=$(clang_output_base)
mkdir -p "$output_base"
labels=()
for t in "${targets[@]}"; do labels+=("//tests/fuzz:$t"); done
log=$(mktemp /tmp/pstrain-fuzz-build-XXXXXX.log)
echo "== bazel build --config=fuzz (output base $output_base)"
if ! bazel --output_base="$output_base" build --config=fuzz "${labels[@]}" >"$log" 2>&1; then
  grep -E "^ERROR|error:" "$log" | head -20 || tail -30 "$log"
  rm -f "$log"
  echo "0 fuzzers passed, ${#targets[@]} failed (build)"
  exit 1
fi
bin=$(bazel --output_base="$output_base" info --config=fuzz bazel-bin 2>/dev/null)
rm -f "$log"

work=$(mktemp -d /tmp/pstrain-fuzz-XXXXXX)
passed=0
failed=0
for t in "${targets[@]}"; do
  dir="$work/$t"
  mkdir -p "$dir/corpus" "$dir/artifacts" "$dir/tmp"
  cp -r "tests/fuzz/corpus/$t/." "$dir/corpus/"
  # -timeout: one input running longer is a hang; -rss_limit_mb: one using more is a leak
  # or an unbounded allocation. Both are failures with a reproducer.
  if TEST_TMPDIR="$dir/tmp" \
     ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$PWD/tests/lsan_suppressions.txt \
     UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
     "$bin/tests/fuzz/$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2560 \
       -artifact_prefix="$dir/artifacts/" -print_final_stats=1 "$dir/corpus" \
       >"$dir/log" 2>&1; then
    runs=$(grep -oE "stat::number_of_executed_units: *[0-9]+" "$dir/log" | grep -oE "[0-9]+$")
    echo "$t: passed, ${runs:-?} inputs in ${seconds}s"
    passed=$((passed + 1))
    rm -rf "$dir"
  else
    failed=$((failed + 1))
    echo "$t: FAILED"
    grep -E "ERROR: |SUMMARY: |runtime error:|==ERROR|Test unit written|deadly signal" "$dir/log" | head -8
    for f in "$dir"/artifacts/*; do
      [ -e "$f" ] && echo "  reproducer: $f  (replay: $bin/tests/fuzz/$t $f)"
    done
    echo "  log: $dir/log"
  fi
done
[ "$failed" -eq 0 ] && rmdir "$work" 2>/dev/null
echo "$passed fuzzers passed, $failed failed"
[ "$failed" -eq 0 ]
