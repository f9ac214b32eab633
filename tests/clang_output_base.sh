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
