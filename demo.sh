#!/usr/bin/env bash
# Installs what is missing, builds, and trains on a local cluster on loopback:
# 1 chief, 2 ps and 2 workers, each its own process configured only by TF_CONFIG,
# on Fashion-MNIST. Flags go to the launcher: --strategy --job --epochs --workers --ps
# --device --devices --verbose (./demo.sh --help lists them all). --strategy=mirrored
# --devices=cpu:0,cpu:1 trains two local replicas in one process;
# --strategy=multi_worker_mirrored --workers=2 trains two synchronous worker processes.
# Every run has a random auth token; --tls runs every channel over mutual TLS with
# certificates made for the run (README, "Security"); --insecure turns both off.
set -euo pipefail

# A relative --job is relative to where the user stands, not to the repository.
args=()
for a in "$@"; do
  if [[ "$a" == --job=* && "${a#--job=}" != /* && -e "${a#--job=}" ]]; then
    a="--job=$(realpath "${a#--job=}")"
  fi
  args+=("$a")
done
cd "$(dirname "$0")"

./tools/install_deps.sh
log=$(mktemp /tmp/pstrain-build-XXXXXX.log)
echo "pstrain: building (a first build takes a few minutes)..." >&2
if ! bazel build //deploy/local:launcher >"$log" 2>&1; then
  grep -E "^ERROR" "$log" | head -20 >&2 || tail -20 "$log" >&2
  echo "pstrain: build failed; full log in $log" >&2
  exit 1
fi
rm -f "$log"
exec bazel-bin/deploy/local/launcher ${args[@]+"${args[@]}"}
