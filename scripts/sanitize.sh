#!/usr/bin/env bash
# Runs the tests under sanitizers, each in its own CPU build folder:
#   scripts/sanitize.sh asan            every test under AddressSanitizer + UndefinedBehaviorSanitizer
#   scripts/sanitize.sh tsan            the engine, scheduler and daemon tests under ThreadSanitizer;
#                                       with Debian's abseil (not instrumented) every absl::Mutex
#                                       looks like no synchronisation: its reports are false
#                                       positives until abseil is built with -fsanitize=thread
#   scripts/sanitize.sh thread-safety   clang's -Wthread-safety over every library and binary
# Extra arguments go to ctest. Installs clang when a mode needs it and it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
shift || true
scripts/setup.sh
jobs=${CONVOY_BUILD_JOBS:-$(nproc)}
common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCONVOY_ENABLE_CUDA=OFF -DCONVOY_BUILD_BENCHMARKS=OFF)

need_clang() {
  command -v clang++ >/dev/null && return
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "sanitize: installing clang" >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends clang >/dev/null
}

case "$mode" in
  asan)
    cmake -S . -B build-asan "${common[@]}" -DCONVOY_SANITIZE=address,undefined >/dev/null
    cmake --build build-asan -j "$jobs"
    # The default model, for the tests that run it (as scripts/test.sh fetches it).
    scripts/fetch-default-model.sh >/dev/null ||
      echo "sanitize: the default model could not be fetched: its tests will fail" >&2
    # halt_on_error: the first report fails the test that caused it.
    ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      ctest --test-dir build-asan --output-on-failure -j "$(nproc)" "$@"
    ;;
  tsan)
    cmake -S . -B build-tsan "${common[@]}" -DCONVOY_SANITIZE=thread >/dev/null
    cmake --build build-tsan -j "$jobs" --target engine_loop_test scheduler_random_test \
      scheduler_cpu_parity_test daemon_e2e_test daemon_errors_test daemon_metrics_test convoyd
    # libgomp is not instrumented: one OpenMP thread keeps its pool out of the reports.
    OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
      ctest --test-dir build-tsan --output-on-failure -j "$(nproc)" \
      -R '(EngineLoop|RandomTest|CpuParity|Daemon|ClientTest)' "$@"
    ;;
  thread-safety)
    need_clang
    CC=clang CXX=clang++ cmake -S . -B build-clang "${common[@]}" -DCONVOY_BUILD_TESTS=OFF \
      -DCONVOY_THREAD_SAFETY=ON >/dev/null
    cmake --build build-clang -j "$jobs"
    ;;
  *)
    echo "usage: $0 asan|tsan|thread-safety [ctest arguments]" >&2
    exit 2
    ;;
esac
