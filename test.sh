#!/usr/bin/env bash
# Installs what is missing, builds everything (the CUDA configuration too when nvcc
# exists, so GPU code always compiles), runs every test, and ends with one line
# "N passed, N failed, N skipped". Exits non-zero on any failure.
#
# Counts are of test targets. A target whose every test case skipped itself (GTEST_SKIP,
# e.g. a GPU test where no GPU answers) counts as skipped, not passed; so does a target
# bazel did not run in a configuration (the CUDA-only tests without nvcc). Every skipped
# target and test case is named above the last line, with its reason.
#
# Every test target must be in a suite of the top-level BUILD (//:unit_tests or
# //:cluster_tests); one that is not is named and counted as a failure.
#
# After the bazel tests, everything is compiled with clang and -Werror=thread-safety, the
# unit tests run again under ASan and UBSan, each fuzzer of tests/fuzz/ runs for a few
# seconds, and ./demo.sh --epochs=1 runs once per strategy; each counts as a test, and so does
# tests/deploy/netns_cluster.sh (skipped where network namespaces are not permitted).
#
# With nvcc, the tests tagged "gpu" (they need --config=cuda) and "cuda_config" (they
# also test what a CUDA build changes) run in the CUDA build too; the GPU ones skip at
# run time when no GPU answers.
set -uo pipefail
cd "$(dirname "$0")"

if ! ./tools/install_deps.sh || ! ./tools/install_test_deps.sh; then
  echo "0 passed, 1 failed, 0 skipped"
  exit 1
fi

# Seconds each fuzzer runs (tests/fuzz/run_fuzzers.sh); PSTRAIN_FUZZ_SECONDS overrides.
FUZZ_SECONDS=${PSTRAIN_FUZZ_SECONDS:-3}
log=$(mktemp /tmp/pstrain-test-XXXXXX.log)
trap 'rm -f "$log"' EXIT
passed=0
failed=0
skipped=0

# Adds up one test run's results from $log (tests/test_summary.py reads bazel's status
# lines and each target's test.xml); its arguments go to the summary script.
summarize() {
  local testlogs report counts
  testlogs=$(bazel info "${config[@]}" bazel-testlogs 2>/dev/null)
  report=$(/usr/bin/python3 tests/test_summary.py --log "$log" --testlogs "$testlogs" "$@")
  counts=$(tail -n 1 <<<"$report")
  sed '$d' <<<"$report"
  read -r _ p f s <<<"$counts"
  passed=$((passed + p))
  failed=$((failed + f))
  skipped=$((skipped + s))
}

# A build or test command that failed without any test reporting: show why, count it.
count_build_failure() {
  grep -E "^ERROR" "$log" | head -20 || tail -30 "$log"
  echo "$1 FAILED"
  failed=$((failed + 1))
}

cuda_targets=()
if [ -x /usr/local/cuda/bin/nvcc ]; then
  config=(--config=cuda)
  echo "== bazel build --config=cuda //... (nvcc found)"
  if bazel build "${config[@]}" //... >"$log" 2>&1; then
    echo "== bazel test --config=cuda (tests tagged gpu or cuda_config)"
    bazel test "${config[@]}" --test_summary=short --build_tests_only \
      --test_tag_filters=gpu,cuda_config //... >"$log" 2>&1
    status=$?
    before=$((passed + failed + skipped))
    summarize --label cuda
    if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then count_build_failure "CUDA tests"; fi
    [ $((passed + failed + skipped)) -gt "$before" ] || count_build_failure "CUDA tests (none ran)"
    # Their results are in; the plain run below reports the gpu ones as not built.
    mapfile -t cuda_targets < <(bazel query 'attr(tags, "\bgpu\b", tests(//...))' 2>/dev/null)
  else
    count_build_failure "CUDA build"
  fi
fi

config=()
failed_before=$failed
echo "== bazel build //..."
if ! bazel build //... >"$log" 2>&1; then count_build_failure "build"; fi

# Every test belongs to a suite of the top-level BUILD; one that does not would never run.
if ! unlisted=$(bazel query 'tests(//...) except tests(//:all_tests)' 2>"$log"); then
  grep -E "^ERROR" "$log" | head -5
  echo "the test suites of the top-level BUILD do not load"
  failed=$((failed + 1))
elif [ -n "$unlisted" ]; then
  echo "tests in no suite of //:all_tests (add them to //:unit_tests or //:cluster_tests in BUILD):"
  echo "$unlisted"
  failed=$((failed + 1))
fi

echo "== bazel test //:all_tests"
bazel test --test_summary=short //:all_tests >"$log" 2>&1
status=$?
ignore=()
for t in "${cuda_targets[@]}"; do ignore+=(--ignore "$t"); done
summarize "${ignore[@]}" --not-run-reason "needs --config=cuda, and nvcc was not found"
if [ "$status" -ne 0 ] && [ "$failed" -eq "$failed_before" ]; then
  # The build itself failed (no test could report): show why and count it.
  count_build_failure "build"
fi
tests_failed=$failed
# Clang's thread-safety analysis (#11): every C++ target compiled with Debian's clang and
# -Werror=thread-safety (.bazelrc's --config=clang, as leveldb builds), counted as one test.
# It compiles under --config=asan, which is --config=clang plus ASan and UBSan, in the clang
# output base, so the fuzzers below only link what it compiled; nothing is linked here.
if [ "$tests_failed" -eq "$failed_before" ]; then
  . tests/clang_output_base.sh
  mapfile -t clang_patterns < <(clang_build_patterns)
  echo "== clang -Werror=thread-safety build (bazel build --config=asan, compile only)"
  if bazel --output_base="$(clang_output_base)" build --config=asan \
      --output_groups=compilation_outputs "${clang_patterns[@]}" >"$log" 2>&1; then
    echo "clang thread-safety build PASSED"
    passed=$((passed + 1))
  else
    grep -E "warning: .*\[-W(thread-safety|error)|error:" "$log" | head -20
    count_build_failure "clang thread-safety build"
  fi
fi
# The unit tests again under AddressSanitizer and UndefinedBehaviorSanitizer (their
# objects were just compiled), each counted as a test: a sanitizer report fails it. The
# cluster tests under ASan, and everything under TSan, take longer than this script may:
# tests/sanitizers.sh asan|tsan runs them.
if [ "$tests_failed" -eq "$failed_before" ]; then
  echo "== tests/sanitizers.sh asan --unit"
  tests/sanitizers.sh asan --unit >"$log" 2>&1
  asan_status=$?
  asan_passed=$(grep -cE "^//[^ ]+ +(\(cached\) )?PASSED" "$log")
  asan_failed=$(grep -cE "^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FLAKY|INCOMPLETE)" "$log")
  grep -E "^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FLAKY|INCOMPLETE)" "$log" |
    sed 's/$/ (under ASan + UBSan)/' || true
  echo "$asan_passed unit tests passed under ASan + UBSan, $asan_failed failed"
  passed=$((passed + asan_passed))
  failed=$((failed + asan_failed))
  if [ "$asan_status" -ne 0 ] && [ "$asan_failed" -eq 0 ]; then
    count_build_failure "ASan unit tests"
  fi
fi
# Each libFuzzer target of tests/fuzz/ for a few seconds, each counted as a test
# (tests/fuzz/run_fuzzers.sh: clang, ASan and UBSan, in a Bazel output base of its own; the
# seed corpora themselves already ran above as //tests/fuzz:*_corpus_test).
if [ "$tests_failed" -eq "$failed_before" ]; then
  echo "== tests/fuzz/run_fuzzers.sh $FUZZ_SECONDS (each fuzzer)"
  if tests/fuzz/run_fuzzers.sh "$FUZZ_SECONDS" >"$log" 2>&1; then :; fi
  fuzz_passed=$(grep -cE "^[a-z_]+_fuzzer: passed" "$log")
  fuzz_failed=$(grep -cE "^[a-z_]+_fuzzer: FAILED" "$log")
  grep -vE "^(== |[0-9]+ fuzzers passed)" "$log" | grep -vE "^[a-z_]+_fuzzer: passed" || true
  if [ $((fuzz_passed + fuzz_failed)) -eq 0 ]; then count_build_failure "fuzzers"; fi
  echo "$fuzz_passed fuzzers passed, $fuzz_failed failed"
  passed=$((passed + fuzz_passed))
  failed=$((failed + fuzz_failed))
fi
# The README's first command, one epoch with each strategy, as a user runs it (everything
# is built by now, so its build step finds nothing to do): each must exit 0 and print the
# epoch line. Logs and checkpoints go to a temp folder removed afterwards.
if [ "$tests_failed" -eq "$failed_before" ]; then
  echo "== ./demo.sh --epochs=1, each strategy"
  demo_dir=$(mktemp -d /tmp/pstrain-demo-XXXXXX)
  trap 'rm -f "$log"; rm -rf "$demo_dir"' EXIT
  for strategy in "--strategy=parameter_server" "--strategy=default" \
                  "--strategy=mirrored --devices=cpu:0,cpu:1" \
                  "--strategy=multi_worker_mirrored --workers=2"; do
    run_dir=$(mktemp -d "$demo_dir/run-XXXXXX")
    # shellcheck disable=SC2086  # the strategy's flags are separate words
    if timeout 600 ./demo.sh $strategy --epochs=1 --log_dir="$run_dir/logs" \
         --checkpoint_dir="$run_dir/checkpoints" >"$log" 2>&1 &&
       grep -qE "^Epoch 1/1 - .*loss: [0-9.]+ - accuracy: " "$log"; then
      echo "./demo.sh $strategy --epochs=1 PASSED"
      passed=$((passed + 1))
    else
      echo "./demo.sh $strategy --epochs=1 FAILED"
      tail -20 "$log"
      failed=$((failed + 1))
    fi
  done
fi
# The cluster across network namespaces, each daemon with its own address on a bridge
# (tests/deploy/netns_cluster.sh); skipped, with its reason, where they are not permitted.
if [ "$tests_failed" -eq "$failed_before" ]; then
  echo "== tests/deploy/netns_cluster.sh"
  tests/deploy/netns_cluster.sh >"$log" 2>&1
  case $? in
    0) echo "tests/deploy/netns_cluster.sh PASSED"; passed=$((passed + 1)) ;;
    77) echo "tests/deploy/netns_cluster.sh $(grep -m1 '^SKIPPED' "$log")"
        skipped=$((skipped + 1)) ;;
    *) echo "tests/deploy/netns_cluster.sh FAILED"; tail -20 "$log"; failed=$((failed + 1)) ;;
  esac
fi
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
