#!/usr/bin/env bash
# Installs what is missing, builds everything (the CUDA code too when nvcc exists, so GPU
# code always compiles), runs every test, and ends with one line
# "N passed, N failed, N skipped" (", N not run" added when a step could not run).
# Exits non-zero on any failure. Each step's wall time, and the total, is printed above
# the last line.
#
# Counts are of test targets. A target whose every test case skipped itself (GTEST_SKIP,
# e.g. a GPU test where no GPU answers) counts as skipped, not passed; so does a target
# bazel did not run in a configuration (the CUDA-only tests without nvcc). Every skipped
# target and test case is named above the last line, with its reason.
#
# Every test target must be in a suite of the top-level BUILD (//:unit_tests or
# //:cluster_tests); one that is not is named and counted as a failure.
#
# The steps, in order:
#  1. With nvcc: the CUDA code and its tests under --config=cuda, those tagged "gpu" (they
#     need a GPU, and skip at run time when none answers) and "cuda_config" (what a CUDA
#     build changes, with or without a GPU).
#  2. bazel build //... with gcc at -O2, but the unit tests that step 4 runs under ASan;
#     tests/layering/check_layering.sh (the build refuses a dependency against the
#     Architecture's arrows; counted as one test); and bazel test of the cluster tests (and
#     of the few unit tests ASan cannot build: those tagged gpu or cuda_config).
#  3. Every C++ target compiled with clang and -Werror=thread-safety, counted as one test;
#     not the cluster tests and mains that gcc builds and runs in step 2, unless one of
#     their own sources takes a lock (clang would compile them only for this check).
#  4. The unit tests (//:unit_tests) under ASan and UBSan, from the objects step 3
#     compiled. Each unit test is compiled once, by clang (gcc is not asked to build it:
#     -O2 of 107 gtest files was about half of a cold gcc build) and run once,
#     instrumented; the code they test runs at -O2 in the cluster tests and the demos.
#  5. Each fuzzer of tests/fuzz/ for a few seconds.
#  6. ./demo.sh --epochs=1 once per strategy.
#  7. tests/deploy/netns_cluster.sh (skipped where network namespaces are not permitted).
# Each of steps 3-7 counts as tests. A step that cannot run because one it needs failed
# (the demos without a gcc build, the ASan tests and fuzzers without the clang build) is
# named "NOT RUN" and counted as not run; every other step runs whatever failed before.
set -uo pipefail
cd "$(dirname "$0")"

passed=0
failed=0
skipped=0
not_run=()
step_names=()
step_seconds=()
total_start=$SECONDS
step_start=$SECONDS
current_step=""

# Starts a timed step (its name is printed as a "== " header).
begin_step() {
  current_step=$1
  step_start=$SECONDS
  echo "== $1"
}
end_step() {
  step_names+=("$current_step")
  step_seconds+=($((SECONDS - step_start)))
}
# A step that cannot run: named, counted, never silently left out.
step_not_run() {
  echo "== $1: NOT RUN ($2)"
  not_run+=("$1")
}
# The per-step times, the total, and the last line; exits with the verdict.
finish() {
  echo "== step times"
  local i
  for i in "${!step_names[@]}"; do
    printf '  %5d s  %s\n' "${step_seconds[$i]}" "${step_names[$i]}"
  done
  printf '  %5d s  total\n' $((SECONDS - total_start))
  for s in "${not_run[@]}"; do echo "NOT RUN: $s"; done
  local last="${passed} passed, ${failed} failed, ${skipped} skipped"
  [ ${#not_run[@]} -eq 0 ] || last+=", ${#not_run[@]} not run"
  echo "$last"
  [ "$failed" -eq 0 ] && [ ${#not_run[@]} -eq 0 ] && [ "$passed" -gt 0 ]
  exit $?
}

begin_step "install (tools/install_deps.sh, tools/install_test_deps.sh)"
if ! ./tools/install_deps.sh || ! ./tools/install_test_deps.sh; then
  failed=$((failed + 1))
  end_step
  not_run+=("everything after the install")
  finish
fi
end_step

# Seconds each fuzzer runs (tests/fuzz/run_fuzzers.sh); PSTRAIN_FUZZ_SECONDS overrides.
FUZZ_SECONDS=${PSTRAIN_FUZZ_SECONDS:-3}
log=$(mktemp /tmp/pstrain-test-XXXXXX.log)
demo_dir=""
trap 'rm -f "$log"; [ -z "$demo_dir" ] || rm -rf "$demo_dir"' EXIT

# Adds up one test run's results from $log: tests/test_summary.py reads bazel's status lines
# and each target's test.xml under TESTLOGS; the other arguments go to the summary script.
summarize() {
  local testlogs=$1 report counts p f s
  shift
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

# Runs `bazel test CONFIG ARGS...` into $log and counts its results (summary_args go to the
# summary); a run that failed with no failing test (a build error) counts as one failure
# named LABEL. CONFIG is one flag such as --config=cuda, or "".
bazel_test_counted() {
  local label=$1 testlogs_config=$2
  shift 2
  local before_failed=$failed before_all=$((passed + failed + skipped)) status testlogs
  # shellcheck disable=SC2086  # the config is empty or one flag
  bazel test $testlogs_config --test_summary=short "$@" >"$log" 2>&1
  status=$?
  # shellcheck disable=SC2086  # the config is empty or one flag
  testlogs=$(bazel info $testlogs_config bazel-testlogs 2>/dev/null)
  summarize "$testlogs" "${summary_args[@]}"
  if [ "$status" -ne 0 ] && [ "$failed" -eq "$before_failed" ]; then
    count_build_failure "$label"
  fi
  [ $((passed + failed + skipped)) -gt "$before_all" ] || count_build_failure "$label (none ran)"
}

# 1. The CUDA code: the CUDA-only targets and their tests (tagged gpu or cuda_config). They
# are targets of their own, not the plain ones rebuilt with other flags (.bazelrc), so they
# share the plain build's objects and overwrite none of its outputs: a second run rebuilds
# nothing. (`bazel build --config=cuda //...` builds the GPU daemons.)
cuda_targets=()
if [ -x /usr/local/cuda/bin/nvcc ]; then
  begin_step "bazel test --config=cuda (the CUDA code; tests tagged gpu or cuda_config)"
  summary_args=(--label cuda)
  bazel_test_counted "CUDA build" --config=cuda --build_tests_only \
    --test_tag_filters=gpu,cuda_config //common/math/... //distribute/allreduce/...
  # Their results are in; the plain run below reports the gpu ones as not built.
  mapfile -t cuda_targets < <(bazel query 'attr(tags, "\bgpu\b|\bcuda_config\b", tests(//...))' 2>/dev/null)
  end_step
fi

# 2. Everything with gcc but the unit tests step 4 runs under ASan (they are compiled by
# clang there; the libraries they test are built here for the daemons and cluster tests).
# The suites go from the patterns too: a test_suite in //... would bring its tests back.
asan_units_query="tests(//:unit_tests) except attr(tags, '\\bgpu\\b|\\bcuda_config\\b', tests(//:unit_tests))"
# The CUDA-only tests (tagged gpu or cuda_config) ran in step 1 under --config=cuda; the
# plain configuration cannot build them, and naming one to bazel test is an error.
cuda_only_query="attr(tags, '\\bgpu\\b|\\bcuda_config\\b', tests(//:all_tests))"
gcc_build_patterns=(//... -//:unit_tests -//:all_tests)
asan_units=()
gcc_tests=(//:all_tests)
if mapfile -t asan_units < <(bazel query "$asan_units_query" 2>"$log") &&
    [ "${#asan_units[@]}" -gt 0 ] &&
    mapfile -t gcc_tests < <(bazel query "tests(//:all_tests) except ($asan_units_query) except $cuda_only_query" 2>"$log"); then
  for t in "${asan_units[@]}"; do gcc_build_patterns+=("-$t"); done
else
  # The suites do not load: build and test everything with gcc (the check below says why).
  gcc_build_patterns=(//...)
  gcc_tests=(//:all_tests)
fi
begin_step "bazel build //... (gcc; the unit tests under ASan in step 4)"
gcc_build_ok=1
if ! bazel build -- "${gcc_build_patterns[@]}" >"$log" 2>&1; then
  count_build_failure "build"
  gcc_build_ok=0
fi
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
end_step

# The layering the build enforces (README "Architecture"): forbidden dependencies fail with
# a visibility error, and bazel query finds none in the graph. Counted as one test.
begin_step "tests/layering/check_layering.sh"
if tests/layering/check_layering.sh >"$log" 2>&1; then
  echo "tests/layering/check_layering.sh PASSED"
  passed=$((passed + 1))
else
  grep -m1 "^check_layering: FAILED" "$log" || tail -5 "$log"
  echo "tests/layering/check_layering.sh FAILED"
  failed=$((failed + 1))
fi
end_step

begin_step "bazel test (gcc): the cluster tests"
summary_args=(--not-run-reason "needs --config=cuda, and nvcc was not found")
for t in "${cuda_targets[@]}"; do summary_args+=(--ignore "$t"); done
bazel_test_counted "build" "" -- "${gcc_tests[@]}"
if [ "${#cuda_targets[@]}" -eq 0 ] && [ "${gcc_tests[0]}" != //:all_tests ]; then
  # No nvcc: the CUDA-only tests were built nowhere; say so, as skipped.
  while read -r t; do
    [ -n "$t" ] || continue
    echo "$t SKIPPED: needs --config=cuda, and nvcc was not found"
    skipped=$((skipped + 1))
  done < <(bazel query "$cuda_only_query" 2>/dev/null)
fi
end_step

# 3. Clang's thread-safety analysis (#11): every C++ target compiled with Debian's clang and
# -Werror=thread-safety (.bazelrc's --config=clang, as leveldb builds), counted as one test.
# It compiles under --config=asan (--config=clang plus ASan and UBSan at -O0) in the clang
# output base, so steps 4 and 5 only link what it compiled.
. tests/clang_output_base.sh
clang_bazel() { bazel --output_base="$(clang_output_base)" "$@"; }
begin_step "clang -Werror=thread-safety build (bazel build --config=asan, compile only)"
mapfile -t clang_patterns < <(clang_build_patterns)
# The cluster tests and the daemons', tools' and benchmarks' mains are built and run by gcc
# in step 2; here they would only be compiled, never linked or run. Each is left out unless
# one of its own sources takes a lock or carries a thread-safety annotation (the libraries
# they link, and every header's inline code, are compiled here anyway). On 6d75215 that
# left out 41 gtest and main files, about a sixth of this step's cold compile.
gcc_only_query="tests(//:cluster_tests) + (kind(cc_binary, //...) except //tests/fuzz/...)"
lock_pattern='Mutex|LOCKS_EXCLUDED|LOCKS_REQUIRED|GUARDED_BY|THREAD_ANNOTATION'
if mapfile -t gcc_only < <(bazel query "$gcc_only_query" 2>"$log") &&
    mapfile -t gcc_only_srcs < <(bazel query "labels(srcs, $gcc_only_query)" 2>>"$log"); then
  locking_srcs=()
  for label in "${gcc_only_srcs[@]}"; do
    file=${label#//}
    file=${file/://}
    if [ -f "$file" ] && grep -qE "$lock_pattern" "$file"; then locking_srcs+=("$label"); fi
  done
  keep=()
  if [ "${#locking_srcs[@]}" -gt 0 ]; then
    mapfile -t keep < <(bazel query "rdeps($gcc_only_query, set(${locking_srcs[*]}), 1) intersect ($gcc_only_query)" 2>>"$log")
  fi
  left_out=0
  for target in "${gcc_only[@]}"; do
    if [[ " ${keep[*]} " != *" $target "* ]]; then
      clang_patterns+=("-$target")
      left_out=$((left_out + 1))
    fi
  done
  echo "clang compiles every target but $left_out gcc-only ones (cluster tests, mains) without locks"
fi
clang_build_ok=0
if clang_bazel build --config=asan --output_groups=compilation_outputs -- \
    "${clang_patterns[@]}" >"$log" 2>&1; then
  echo "clang thread-safety build PASSED"
  passed=$((passed + 1))
  clang_build_ok=1
else
  grep -E "warning: .*\[-W(thread-safety|error)|error:" "$log" | head -20
  count_build_failure "clang thread-safety build"
fi
end_step

# 4. The unit tests again under AddressSanitizer and UndefinedBehaviorSanitizer, each
# counted as a test: a sanitizer report fails it. The cluster tests under ASan, and
# everything under TSan, take longer than this script may: tests/sanitizers.sh asan|tsan
# runs them.
if [ "$clang_build_ok" -eq 1 ]; then
  begin_step "tests/sanitizers.sh asan --unit"
  before_failed=$failed
  tests/sanitizers.sh asan --unit >"$log" 2>&1
  asan_status=$?
  summarize "$(clang_bazel info --config=asan bazel-testlogs 2>/dev/null)" \
    --label "ASan + UBSan" --not-run-reason "not built under --config=asan"
  if [ "$asan_status" -ne 0 ] && [ "$failed" -eq "$before_failed" ]; then
    count_build_failure "ASan unit tests"
  fi
  end_step
else
  step_not_run "tests/sanitizers.sh asan --unit" "the clang build failed"
fi

# 5. Each libFuzzer target of tests/fuzz/ for a few seconds, each counted as a test
# (tests/fuzz/run_fuzzers.sh: --config=fuzz, the objects of step 3 relinked; the seed
# corpora themselves already ran as //tests/fuzz:*_corpus_test in steps 2 and 4).
if [ "$clang_build_ok" -eq 1 ]; then
  begin_step "tests/fuzz/run_fuzzers.sh $FUZZ_SECONDS (each fuzzer)"
  tests/fuzz/run_fuzzers.sh "$FUZZ_SECONDS" >"$log" 2>&1
  fuzz_passed=$(grep -cE "^[a-z_]+_fuzzer: passed" "$log")
  fuzz_failed=$(grep -cE "^[a-z_]+_fuzzer: FAILED" "$log")
  grep -vE "^(== |[0-9]+ fuzzers passed)" "$log" | grep -vE "^[a-z_]+_fuzzer: passed" || true
  if [ $((fuzz_passed + fuzz_failed)) -eq 0 ]; then count_build_failure "fuzzers"; fi
  echo "$fuzz_passed fuzzers passed, $fuzz_failed failed"
  passed=$((passed + fuzz_passed))
  failed=$((failed + fuzz_failed))
  end_step
else
  step_not_run "tests/fuzz/run_fuzzers.sh" "the clang build failed"
fi

# 6. The README's first command, one epoch with each strategy, as a user runs it (the gcc
# build is done, so its build step finds nothing to do): each must exit 0 and print the
# epoch line. Logs and checkpoints go to a temp folder removed afterwards.
demo_strategies=("--strategy=parameter_server" "--strategy=default"
                 "--strategy=mirrored --devices=cpu:0,cpu:1"
                 "--strategy=multi_worker_mirrored --workers=2")
if [ "$gcc_build_ok" -eq 1 ]; then
  begin_step "./demo.sh --epochs=1, each strategy"
  demo_dir=$(mktemp -d /tmp/pstrain-demo-XXXXXX)
  for strategy in "${demo_strategies[@]}"; do
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
  end_step
else
  for strategy in "${demo_strategies[@]}"; do
    step_not_run "./demo.sh $strategy --epochs=1" "bazel build //... failed"
  done
fi

# 7. The cluster across network namespaces, each daemon with its own address on a bridge
# (tests/deploy/netns_cluster.sh); skipped, with its reason, where they are not permitted.
if [ "$gcc_build_ok" -eq 1 ]; then
  begin_step "tests/deploy/netns_cluster.sh"
  tests/deploy/netns_cluster.sh >"$log" 2>&1
  case $? in
    0) echo "tests/deploy/netns_cluster.sh PASSED"; passed=$((passed + 1)) ;;
    77) echo "tests/deploy/netns_cluster.sh $(grep -m1 '^SKIPPED' "$log")"
        skipped=$((skipped + 1)) ;;
    *) echo "tests/deploy/netns_cluster.sh FAILED"; tail -20 "$log"; failed=$((failed + 1)) ;;
  esac
  end_step
else
  step_not_run "tests/deploy/netns_cluster.sh" "bazel build //... failed"
fi
finish
