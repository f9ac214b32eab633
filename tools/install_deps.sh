#!/usr/bin/env bash
# Installs the Debian packages pstrain builds and runs with, when any is missing.
# Idempotent, and silent when everything is already there.
set -euo pipefail

PACKAGES=(
  g++
  bazel-bootstrap
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libopenblas-dev zlib1g-dev nlohmann-json3-dev
  prometheus-cpp-dev libcpp-httplib-dev libssl-dev
  openssl
  libgtest-dev libgmock-dev
  clang libclang-rt-14-dev
  dataset-fashion-mnist
  python3 python3-numpy
  libhdf5-dev libzip-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=(sudo); else
    echo "install_deps: missing packages (${missing[*]}) and not root; install them and rerun" >&2
    exit 1
  fi
fi
echo "install_deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq >/dev/null
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
