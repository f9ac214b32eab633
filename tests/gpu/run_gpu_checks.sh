#!/usr/bin/env bash
# Runs the CUDA backend checks (common/math:cuda_backend_test) on a machine with an NVIDIA
# GPU, from a binary built elsewhere with `bazel build --config=cuda`. See README.md here.
#
#   run_gpu_checks.sh [--binary PATH] [--libs DIR] [--allow-skip] [-- GTEST_ARGS...]
#       Runs the test binary (default bazel-bin/common/math/cuda_backend_test) with DIR (the
#       shared libraries carried from the build machine) first on LD_LIBRARY_PATH. Prints
#       PASS or FAIL and "N passed, N failed"; exits 0 only when every test ran and passed.
#       A skipped test means no CUDA device answered; that is a FAIL unless --allow-skip.
#
#   run_gpu_checks.sh --collect DIR [--binary PATH] [--with-cuda-libs]
#       On the build machine: copies the binary and the shared libraries it needs (per ldd)
#       into DIR, leaving out glibc's own libraries and, unless --with-cuda-libs, CUDA's
#       (the GPU host has the CUDA 13 runtime; libcublasLt alone is ~500 MB).
#
# Exit codes: 0 pass; 1 a test failed or skipped; 2 usage or missing binary; 3 missing
# shared libraries; 4 the binary crashed or printed no gtest summary.

set -u

binary=""
libs=""
collect=""
allow_skip=0
with_cuda_libs=0
gtest_args=()

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="${2:?--binary needs a path}"; shift 2 ;;
    --libs) libs="${2:?--libs needs a folder}"; shift 2 ;;
    --collect) collect="${2:?--collect needs a folder}"; shift 2 ;;
    --allow-skip) allow_skip=1; shift ;;
    --with-cuda-libs) with_cuda_libs=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; gtest_args=("$@"); break ;;
    *) echo "run_gpu_checks: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done

if [ -z "$binary" ]; then
  if [ -n "$collect" ]; then
    binary="bazel-bin/common/math/cuda_backend_test"
  elif [ -x "$(dirname "$0")/cuda_backend_test" ]; then
    binary="$(dirname "$0")/cuda_backend_test"  # a folder made by --collect
  else
    binary="bazel-bin/common/math/cuda_backend_test"
  fi
fi
if [ ! -f "$binary" ] || [ ! -x "$binary" ]; then
  echo "FAIL: test binary not found or not executable: $binary" >&2
  echo "      build it with: bazel build --config=cuda //common/math:cuda_backend_test" >&2
  exit 2
fi

# ---- collect mode (build machine) -------------------------------------------------------
if [ -n "$collect" ]; then
  mkdir -p "$collect" || exit 2
  cp -L "$binary" "$collect/cuda_backend_test" || exit 2
  cp "$0" "$collect/run_gpu_checks.sh" || exit 2
  mkdir -p "$collect/lib"
  copied=0
  missing=0
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    if [ "$path" = "not" ]; then
      echo "run_gpu_checks: ldd cannot resolve $name on this machine" >&2
      missing=1
      continue
    fi
    case "$name" in
      # glibc's own pieces must come from the GPU host (they pair with its ld.so).
      linux-vdso*|ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libresolv.so*) continue ;;
      libcuda.so*|libnvidia*) continue ;;  # the driver: always the host's own
      libcudart.so*|libcublas.so*|libcublasLt.so*)
        [ "$with_cuda_libs" = 1 ] || continue ;;
    esac
    cp -L "$path" "$collect/lib/$name" && copied=$((copied + 1))
  done < <(ldd "$binary")
  echo "collected $copied shared libraries into $collect/lib"
  echo "on the GPU host: $collect/run_gpu_checks.sh --libs $collect/lib"
  [ "$missing" = 0 ] || exit 3
  exit 0
fi

# ---- run mode (GPU host) ----------------------------------------------------------------
if [ -z "$libs" ] && [ -d "$(dirname "$binary")/lib" ]; then
  libs="$(dirname "$binary")/lib"  # the layout --collect makes
fi
if [ -n "$libs" ]; then
  if [ ! -d "$libs" ]; then
    echo "FAIL: library folder not found: $libs" >&2
    exit 2
  fi
  libs="$(cd "$libs" && pwd)"
  export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

if command -v nvidia-smi >/dev/null 2>&1; then
  echo "GPU(s): $(nvidia-smi -L 2>&1 | tr '\n' ';')"
else
  echo "note: nvidia-smi not found; the test itself asks the CUDA runtime for devices"
fi

unresolved="$(ldd "$binary" 2>&1 | awk '/not found/ {print $1}' | tr '\n' ' ')"
if [ -n "$unresolved" ]; then
  echo "FAIL: shared libraries not found: $unresolved" >&2
  echo "      collect them on the build machine (run_gpu_checks.sh --collect DIR) and pass --libs DIR/lib" >&2
  exit 3
fi

log="$(mktemp "${TMPDIR:-/tmp}/cuda_backend_test.XXXXXX")"
trap 'rm -f "$log"' EXIT
"$binary" --gtest_color=no "${gtest_args[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

passed=$(grep -c '^\[       OK \] ' "$log")
failed=$(grep -cE '^\[  FAILED  \] [^ ]+ \(' "$log")
skipped=$(grep -cE '^\[  SKIPPED \] [^ ]+ \(' "$log")

echo
if ! grep -q '^\[==========\] .* ran\.' "$log"; then
  echo "FAIL: the test binary exited with status $rc before finishing (crash or bad setup)"
  echo "$passed passed, $((failed + 1)) failed"
  exit 4
fi
if [ "$skipped" -gt 0 ] && [ "$allow_skip" = 0 ]; then
  echo "FAIL: $skipped test(s) skipped: no CUDA device answered (see the skip reason above)"
  echo "$passed passed, $((failed + skipped)) failed"
  exit 1
fi
if [ "$rc" -ne 0 ] || [ "$failed" -gt 0 ]; then
  echo "FAIL: $failed test(s) failed (exit status $rc)"
  echo "$passed passed, $failed failed"
  exit 1
fi
extra=""
[ "$skipped" -gt 0 ] && extra=", $skipped skipped (--allow-skip)"
echo "PASS: CUDA backend matches the CPU backend ($passed tests$extra)"
echo "$passed passed, 0 failed"
exit 0
