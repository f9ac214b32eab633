#!/usr/bin/env bash
# Checks that the build enforces the Architecture's arrows (README "Architecture", the
# package groups of the top-level BUILD). Two checks, both must hold:
#  1. No forbidden edge today (bazel query, data and test dependencies included): nothing
#     under //common/... depends on //chief/..., //ps_server/..., //worker/...,
#     //distribute/..., //train/... or //pstrain/...; nothing under //distribute/... on
#     //chief/..., //worker/..., //train/... or //pstrain/...; nothing under //ps_server/...,
#     //worker/... or //train/... on //chief/...; nothing under //train/... on
#     //worker/... (train runs Fit on the public Strategy, pstrain/fit.h and
#     pstrain/create_strategy.h; the rest of pstrain/ is refused it by visibility, which
#     train/layering_probe checks).
#  2. Refusal: every target tagged "layering_probe" (common/layering_probe,
#     ps_server/layering_probe, distribute/layering_probe, train/layering_probe: manual
#     targets that depend
#     across a forbidden arrow, with the rights of the package they sit in) fails
#     analysis, and Bazel names each of its dependencies with "target 'DEP' is not visible
#     from target 'PROBE'".
# Prints "check_layering: PASSED", or "check_layering: FAILED: <one-line reason>" and exits
# 1. Runs in this checkout's default output base (the gcc build's), analysis only.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

log=$(mktemp /tmp/pstrain-layering-XXXXXX.log)
trap 'rm -f "$log"' EXIT

fail() {
  echo "check_layering: FAILED: $*"
  exit 1
}

probe_query='attr(tags, "\blayering_probe\b", //...)'
if ! probes=$(bazel query "$probe_query" 2>"$log"); then
  fail "bazel query of the probes failed: $(grep -m1 ERROR "$log")"
fi
[ -n "$probes" ] || fail "no target tagged layering_probe (common/layering_probe/BUILD is gone?)"

# 1. No forbidden dependency in the graph (the probes left out).
# Prints the first dependency of FROM (target patterns) inside TO as a path ("a -> b -> c"),
# or nothing when there is none; returns 1 when the query fails.
forbidden_path() {
  local from="($1) except $probe_query" to=$2 found
  found=$(bazel query "deps($from) intersect ($to)" 2>"$log") || return 1
  [ -n "$found" ] || return 0
  bazel query "somepath($from, $(head -n 1 <<<"$found"))" 2>"$log" | paste -sd' ' |
    sed 's/ / -> /g'
}
if ! path=$(forbidden_path "//common/..." \
              "//chief/... + //ps_server/... + //worker/... + //train/... + //pstrain/... + //distribute/..."); then
  fail "bazel query failed: $(grep -m1 ERROR "$log")"
fi
[ -z "$path" ] || fail "common/ depends on a daemon, distribute/ or pstrain/: $path"
if ! path=$(forbidden_path "//distribute/..." \
              "//chief/... + //worker/... + //train/... + //pstrain/..."); then
  fail "bazel query failed: $(grep -m1 ERROR "$log")"
fi
[ -z "$path" ] || fail "distribute/ depends on chief/, worker/, train/ or pstrain/: $path"
if ! path=$(forbidden_path "//ps_server/... + //worker/... + //train/..." "//chief/..."); then
  fail "bazel query failed: $(grep -m1 ERROR "$log")"
fi
[ -z "$path" ] || fail "ps_server/, worker/ or train/ depends on chief/: $path"
if ! path=$(forbidden_path "//train/..." "//worker/..."); then
  fail "bazel query failed: $(grep -m1 ERROR "$log")"
fi
[ -z "$path" ] || fail "train/ depends on worker/: $path"
echo "no dependency of common/ on a daemon, distribute/ or pstrain/, none of distribute/ on" \
  "chief/, worker/, train/ or pstrain/, none of ps_server/, worker/ or train/ on chief/," \
  "none of train/ on worker/"

# 2. Each probe must be refused, each of its dependencies named as not visible.
# shellcheck disable=SC2086  # one label per word
bazel build --nobuild --keep_going $probes >"$log" 2>&1
build_status=$?
refused=0
for probe in $probes; do
  if ! deps=$(bazel query "labels(deps, $probe)" 2>/dev/null) || [ -z "$deps" ]; then
    fail "cannot read the dependencies of $probe"
  fi
  for dep in $deps; do
    if grep -qF "target '$dep' is not visible from target '$probe'" "$log"; then
      refused=$((refused + 1))
      continue
    fi
    # Not refused: an error of its own, errors elsewhere (its dependencies do not build), or
    # none (the arrow is not enforced).
    own=$(grep -m1 -F "rule $probe:" "$log")
    [ -z "$own" ] || fail "$probe failed, but not as 'not visible': $own"
    other=$(grep -E "^ERROR: .*: in [a-z_]+ rule " "$log" |
              grep -vE "is not visible from target '//[a-z_/]+/layering_probe:" | head -n 1)
    [ -z "$other" ] || fail "the probes' dependencies do not build: $other"
    fail "$dep is visible from $probe: that arrow is not enforced (check its visibility)"
  done
done
[ "$build_status" -ne 0 ] || fail "the probes built (bazel exited 0)"
echo "refused, as the arrows say: $refused forbidden dependencies of $(wc -w <<<"$probes") probes"

echo "check_layering: PASSED"
