#!/usr/bin/env bash
# Installs what is missing, builds everything (the CUDA configuration too when nvcc
# exists, so GPU code always compiles), runs every test, and ends with one line
# "N passed, N failed". Exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")"

if ! ./tools/install_deps.sh || ! ./tools/install_test_deps.sh; then
  echo "0 passed, 1 failed"
  exit 1
fi

log=$(mktemp /tmp/pstrain-test-XXXXXX.log)
trap 'rm -f "$log"' EXIT
build_failures=0

if [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "== bazel build --config=cuda //... (nvcc found)"
  if ! bazel build --config=cuda //... >"$log" 2>&1; then
    grep -E "^ERROR" "$log" | head -20 || tail -30 "$log"
    echo "CUDA build FAILED"
    build_failures=1
  fi
fi

echo "== bazel test //..."
bazel test --test_summary=short //... >"$log" 2>&1
status=$?
grep -E "^//" "$log"
passed=$(grep -cE "^//[^ ]+ +(\(cached\) )?PASSED" "$log")
failed=$(grep -cE "^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FLAKY|INCOMPLETE)" "$log")
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  # The build itself failed (no test could report): show why and count it.
  grep -E "^ERROR" "$log" | head -20 || tail -30 "$log"
  failed=1
fi
failed=$((failed + build_failures))
echo "${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
