# Sourced by tests/sanitizers.sh and tests/fuzz/run_fuzzers.sh: the Bazel output base for
# clang builds of this checkout (the gcc build keeps Bazel's default one, so switching
# compilers never rebuilds either). One per checkout folder, under ~/.cache; override with
# PSTRAIN_CLANG_OUTPUT_BASE.
clang_output_base() {
  if [ -n "${PSTRAIN_CLANG_OUTPUT_BASE:-}" ]; then
    echo "$PSTRAIN_CLANG_OUTPUT_BASE"
    return
  fi
  local key
  key=$(pwd -P | md5sum | cut -c1-16)
  echo "${HOME:-/root}/.cache/pstrain-clang/${key}"
}

# Every package of this checkout as target patterns ("//:all //bench/... //chief/..."),
# for the clang builds in place of //...: Bazel skips the bazel-<folder> link of its own
# output base when it expands //..., but not the gcc build's link, which a clang build in
# another output base would read as source packages (and fail on Bazel's own BUILD files).
clang_build_patterns() {
  echo "//:all"
  find . -name BUILD -not -path './bazel-*' -not -path './.git/*' | cut -d/ -f2 |
    grep -v '^BUILD$' | sort -u | sed 's|.*|//&/...|'
}
