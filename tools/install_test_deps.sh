#!/usr/bin/env bash
# Installs what the observability tests run besides the build, when any of it is missing:
# Debian's prometheus (a real Prometheus scrapes a real cluster) and chromium (the
# dashboard in a headless browser), python3-h5py (the .keras export is read back by h5py, not
# by pstrain's code), docker-compose (deploy_manifests_test runs `docker-compose config -q` on
# the Compose files; it needs no Docker engine), and from the npm registry the packages pinned in
# tests/node/package-lock.json (protobufjs and a CRC-32C for an event-file reader that
# shares no code with the writer, playwright-core to drive Chromium) into
# /usr/local/lib/pstrain-test-node, where the tests find them (NODE_PATH).
# Idempotent, and silent when everything is already there. ./test.sh runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_DIR=/usr/local/lib/pstrain-test-node
PACKAGES=(prometheus chromium python3-h5py docker-compose)
command -v npm >/dev/null 2>&1 || PACKAGES+=(nodejs npm)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
SUDO=()
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO=(sudo); fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "install_test_deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -qq >/dev/null
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The exact packages of the lock file; reinstalled only when it changed.
if ! cmp -s tests/node/package-lock.json "$NODE_DIR/package-lock.json" ||
   [ ! -d "$NODE_DIR/node_modules/protobufjs" ]; then
  echo "install_test_deps: installing tests/node's npm packages into $NODE_DIR" >&2
  "${SUDO[@]}" mkdir -p "$NODE_DIR"
  "${SUDO[@]}" cp tests/node/package.json tests/node/package-lock.json "$NODE_DIR/"
  (cd "$NODE_DIR" && "${SUDO[@]}" npm ci --no-audit --no-fund --ignore-scripts >/dev/null)
fi
