#!/usr/bin/env bash
# Builds and runs the test suite under a sanitizer, with Debian's clang 14:
#   tests/sanitizers.sh asan|tsan [--unit] [TARGET...]
# asan: AddressSanitizer + UndefinedBehaviorSanitizer (leaks included); tsan:
# ThreadSanitizer, with the third-party suppressions of tests/tsan_suppressions.txt. Any
# report fails its test. --unit runs only the unit tests (//:unit_tests: no multi-process
# cluster runs; the fuzz corpus tests and process_group_test included) but the CUDA-only
# ones tagged gpu, which clang cannot build. Bazel runs with an output base of its own (see
# tests/clang_output_base.sh), so the gcc build is not disturbed. Ends with one line
# "N passed, N failed" and exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
. tests/clang_output_base.sh

usage() { echo "usage: tests/sanitizers.sh asan|tsan [--unit] [TARGET...]" >&2; exit 2; }
[ $# -ge 1 ] || usage
config=$1
shift
case "$config" in asan|tsan) ;; *) usage ;; esac
unit=0
if [ "${1:-}" = "--unit" ]; then unit=1; shift; fi

output_base=$(clang_output_base)
mkdir -p "$output_base"
bazel_clang() { bazel --output_base="$output_base" "$@"; }

if [ $# -gt 0 ]; then
  targets=("$@")
elif [ "$unit" -eq 1 ]; then
  mapfile -t targets < <(bazel_clang query "tests(//:unit_tests) except attr(tags, '\\bgpu\\b|\\bcuda_config\\b', tests(//:unit_tests))" 2>/dev/null)
else
  mapfile -t targets < <(clang_build_patterns)
fi

extra=()
if [ "$config" = asan ]; then
  # print_suppressions=0: LeakSanitizer would otherwise print its table of suppressions
  # used at the exit of every process that matched one (c-ares' leak is in each gRPC
  # client), into output the tests read (psctl's table, which multiprocess_cluster_test
  # parses with stderr merged).
  extra+=("--test_env=LSAN_OPTIONS=print_suppressions=0:suppressions=$PWD/tests/lsan_suppressions.txt")
fi
if [ "$config" = tsan ]; then
  extra+=("--test_env=TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan_suppressions.txt")
  # Code under TSan runs 5-15 times slower, and the cluster tests run several
  # instrumented processes at once on the same cores: each size's timeout (Bazel's
  # short, moderate, long, eternal: 60, 300, 900, 3600 s) is scaled up for this build only.
  extra+=("--test_timeout=300,1200,3600,3600")
  # One OpenBLAS thread: its pool hands work out and back through spinning on atomics
  # inside the uninstrumented library, so every later read of a matrix the pool wrote is a
  # race to TSan. tsan_suppressions.txt silences it, but TSan still rebuilds both stacks
  # for each such access before finding the suppression: the in-process CNN cluster of
  # fashion_mnist_cnn_test made no step in 10 minutes that way. (Multi-process tests
  # already give their daemons one thread.)
  extra+=("--test_env=OPENBLAS_NUM_THREADS=1")
fi

log=$(mktemp /tmp/pstrain-sanitizers-XXXXXX.log)
trap 'rm -f "$log"' EXIT
echo "== bazel test --config=$config (output base $output_base)"
bazel_clang test --config="$config" --test_summary=short -k "${extra[@]}" "${targets[@]}" >"$log" 2>&1
status=$?
grep -E "^//" "$log"
passed=$(grep -cE "^//[^ ]+ +(\(cached\) )?PASSED" "$log")
failed=$(grep -cE "^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FLAKY|INCOMPLETE)" "$log")
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  grep -E "^ERROR" "$log" | head -20 || tail -30 "$log"
  failed=1
fi
echo "${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
