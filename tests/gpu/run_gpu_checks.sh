#!/usr/bin/env bash
# Runs the GPU checks on a machine with an NVIDIA GPU, from binaries built elsewhere with
# `bazel build --config=cuda`: the CUDA backend (common/math:cuda_backend_test) and the NCCL
# all-reduce (distribute/allreduce:nccl_allreduce_test). See README.md here.
#
#   run_gpu_checks.sh [--binary PATH]... [--libs DIR] [--allow-skip] [-- GTEST_ARGS...]
#       Runs each test binary (default: bazel-bin/common/math/cuda_backend_test and
#       bazel-bin/distribute/allreduce/nccl_allreduce_test) with DIR (the shared libraries
#       carried from the build machine) first on LD_LIBRARY_PATH. Prints PASS or FAIL and
#       "N passed, N failed"; exits 0 only when every test ran and passed. A skipped test
#       means no CUDA device answered; that is a FAIL unless --allow-skip.
#
#   run_gpu_checks.sh --collect DIR [--binary PATH]... [--with-cuda-libs]
#       On the build machine: copies the binaries and the shared libraries they need (per
#       ldd) into DIR, leaving out glibc's own libraries and, unless --with-cuda-libs, CUDA's
#       (the GPU host has the CUDA 13 runtime; libcublasLt alone is ~500 MB, libnccl ~220 MB).
#
# Exit codes: 0 pass; 1 a test failed or skipped; 2 usage or missing binary; 3 missing
# shared libraries; 4 the binary crashed or printed no gtest summary.

set -u

binaries=()
libs=""
collect=""
allow_skip=0
with_cuda_libs=0
gtest_args=()

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binaries+=("${2:?--binary needs a path}"); shift 2 ;;
    --libs) libs="${2:?--libs needs a folder}"; shift 2 ;;
    --collect) collect="${2:?--collect needs a folder}"; shift 2 ;;
    --allow-skip) allow_skip=1; shift ;;
    --with-cuda-libs) with_cuda_libs=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; gtest_args=("$@"); break ;;
    *) echo "run_gpu_checks: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done

if [ ${#binaries[@]} -eq 0 ]; then
  for target in common/math/cuda_backend_test distribute/allreduce/nccl_allreduce_test; do
    name="$(basename "$target")"
    if [ -z "$collect" ] && [ -x "$(dirname "$0")/$name" ]; then
      binaries+=("$(dirname "$0")/$name")  # a folder made by --collect
    else
      binaries+=("bazel-bin/$target")
    fi
  done
fi
for binary in "${binaries[@]}"; do
  if [ ! -f "$binary" ] || [ ! -x "$binary" ]; then
    echo "FAIL: test binary not found or not executable: $binary" >&2
    echo "      build it with: bazel build --config=cuda //common/math:cuda_backend_test" \
      "//distribute/allreduce:nccl_allreduce_test" >&2
    exit 2
  fi
done
binary="${binaries[0]}"

# ---- collect mode (build machine) -------------------------------------------------------
if [ -n "$collect" ]; then
  mkdir -p "$collect" || exit 2
  for binary in "${binaries[@]}"; do
    cp -L "$binary" "$collect/$(basename "$binary")" || exit 2
  done
  cp "$0" "$collect/run_gpu_checks.sh" || exit 2
  mkdir -p "$collect/lib"
  copied=0
  missing=0
  while read -r name arrow path _; do
    [ -e "$collect/lib/$name" ] && continue  # needed by an earlier binary too
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
      libcudart.so*|libcublas.so*|libcublasLt.so*|libnccl.so*)
        [ "$with_cuda_libs" = 1 ] || continue ;;
    esac
    cp -L "$path" "$collect/lib/$name" && copied=$((copied + 1))
  done < <(for binary in "${binaries[@]}"; do ldd "$binary"; done)
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

unresolved="$(for binary in "${binaries[@]}"; do ldd "$binary" 2>&1; done |
  awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')"
if [ -n "$unresolved" ]; then
  echo "FAIL: shared libraries not found: $unresolved" >&2
  echo "      collect them on the build machine (run_gpu_checks.sh --collect DIR) and pass --libs DIR/lib" >&2
  exit 3
fi

log="$(mktemp "${TMPDIR:-/tmp}/gpu_checks.XXXXXX")"
trap 'rm -f "$log"' EXIT
passed=0
failed=0
skipped=0
crashed=""
failing=""
for binary in "${binaries[@]}"; do
  echo "== $(basename "$binary")"
  "$binary" --gtest_color=no "${gtest_args[@]}" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  passed=$((passed + $(grep -c '^\[       OK \] ' "$log")))
  f=$(grep -cE '^\[  FAILED  \] [^ ]+ \(' "$log")
  failed=$((failed + f))
  skipped=$((skipped + $(grep -cE '^\[  SKIPPED \] [^ ]+ \(' "$log")))
  if ! grep -q '^\[==========\] .* ran\.' "$log"; then
    crashed="$crashed $(basename "$binary") (exit status $rc)"
  elif [ "$rc" -ne 0 ] || [ "$f" -gt 0 ]; then
    failing="$failing $(basename "$binary") (exit status $rc)"
  fi
done

echo
if [ -n "$crashed" ]; then
  echo "FAIL: exited before finishing (crash or bad setup):$crashed"
  echo "$passed passed, $((failed + 1)) failed"
  exit 4
fi
if [ "$skipped" -gt 0 ] && [ "$allow_skip" = 0 ]; then
  echo "FAIL: $skipped test(s) skipped: no CUDA device answered (see the skip reason above)"
  echo "$passed passed, $((failed + skipped)) failed"
  exit 1
fi
if [ -n "$failing" ] || [ "$failed" -gt 0 ]; then
  echo "FAIL: $failed test(s) failed in:$failing"
  echo "$passed passed, $failed failed"
  exit 1
fi
extra=""
[ "$skipped" -gt 0 ] && extra=", $skipped skipped (--allow-skip)"
echo "PASS: CUDA backend matches the CPU backend; NCCL sums ($passed tests$extra)"
echo "$passed passed, 0 failed"
exit 0
