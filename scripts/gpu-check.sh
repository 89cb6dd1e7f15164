#!/usr/bin/env bash
# The whole GPU check in one call of the device machine (it has nvcc and cuBLAS but no network,
# Abseil, GoogleTest, oneDNN or OpenBLAS), in two steps:
#
#   1. Here:  scripts/gpu-check.sh build
#      Builds the GPU tests and the benchmark into build-gpu/ (sm_90, no -march=native) and packs
#      them with every shared library they need except glibc, libcuda and cuBLAS into
#      build-gpu/carry/bundle.tar.xz (kept under the 64 MiB carry limit).
#   2. There: the device tool's run, with
#        carry:   ["build-gpu/carry"]
#        command: scripts/gpu-check.sh device
#        timeout_s: 540
#      Runs the kernel tests, the CPU-vs-GPU parity test and the benchmark, writes full logs under
#      $OUT, and ends with one table.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}

build() {
  set -e
  local dir=build-gpu
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCONVOY_ENABLE_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCONVOY_NATIVE=OFF >/dev/null
  cmake --build "$dir" -j "${CONVOY_BUILD_JOBS:-1}" --target kernels_test cuda_executor_test gpu_bench
  local stage="$dir/stage"
  rm -rf "$stage" "$dir/carry"
  mkdir -p "$stage/bin" "$stage/lib" "$dir/carry"
  cp "$dir/tests/kernels/kernels_test" "$dir/tests/kernels/cuda_executor_test" \
    "$dir/bench/gpu/gpu_bench" "$stage/bin/"
  # Every shared library the binaries load, except the C library, the driver and cuBLAS.
  for bin in "$stage"/bin/*; do
    ldd "$bin" | awk '/=> \// {print $3}'
  done | sort -u | grep -vE '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libcuda|libcublas|libcublasLt)\.so' |
    while read -r lib; do cp -L "$lib" "$stage/lib/"; done
  strip --strip-unneeded "$stage"/bin/* "$stage"/lib/* 2>/dev/null || true
  tar -C "$stage" -cJf "$dir/carry/bundle.tar.xz" bin lib
  du -h "$dir/carry/bundle.tar.xz"
  echo "now: device run with carry [\"$dir/carry\"] and command: scripts/gpu-check.sh device"
}

device() {
  local out=${OUT:-/tmp/gpu-check-out}
  mkdir -p "$out"
  local root=/tmp/convoy-gpu
  rm -rf "$root" && mkdir -p "$root"
  tar -C "$root" -xJf build-gpu/carry/bundle.tar.xz || { echo "no bundle: run the build step"; exit 1; }
  local cublas_dir
  cublas_dir=$(dirname "$(ldconfig -p | awk '/libcublas\.so\.13 / {print $NF; exit}')" 2>/dev/null)
  for d in "$cublas_dir" /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -n "$d" ] && [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
  done
  export LD_LIBRARY_PATH="$root/lib:${LD_LIBRARY_PATH:-}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv | tee "$out/nvidia-smi.txt"
  ldd "$root/bin/gpu_bench" | grep -E "not found|cublas" | tee "$out/ldd.txt"

  local status=()
  run() {  # name timeout binary args...
    local name=$1 limit=$2
    shift 2
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    status+=("| $name | exit $rc, $(grep -cE '^\[       OK \]' "$out/$name.log") ok, $(grep -cE '^\[  FAILED  \]' "$out/$name.log") failed lines |")
    echo "--- $name (exit $rc), last lines:"
    tail -n 15 "$out/$name.log"
  }
  run kernels_test 120 "$root/bin/kernels_test"
  run cuda_executor_test 180 "$root/bin/cuda_executor_test"
  run gpu_bench 300 "$root/bin/gpu_bench"

  echo
  echo "=== GPU check: $(date -u +%F) ==="
  echo "| what | result |"
  echo "| --- | --- |"
  printf '%s\n' "${status[@]}"
  grep -h '^GPU_CHECK kernel' "$out/kernels_test.log" | awk '{printf "| kernel %s | rel err %s |\n", $3, $5}'
  grep -h '^GPU_CHECK parity' "$out/cuda_executor_test.log" |
    awk '{printf "| GPU vs CPU executor | logits rel err %s (<= 2e-2), greedy agree %s |\n", $4, $6}'
  sed -n '/=== gpu_bench ===/,$p' "$out/gpu_bench.log" | grep '^|'
}

case "$mode" in
  build) build ;;
  device) device ;;
  *) echo "usage: $0 build|device" >&2; exit 2 ;;
esac
