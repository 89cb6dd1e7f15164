#!/usr/bin/env bash
# Runs the tests under sanitizers, each in its own CPU build folder:
#   scripts/sanitize.sh asan            every test under AddressSanitizer + UndefinedBehaviorSanitizer
#   scripts/sanitize.sh tsan            the tests labelled "threaded" (engine, scheduler, HTTP
#                                       server; tests/CMakeLists.txt) under ThreadSanitizer, over
#                                       Debian's abseil built with -fsanitize=thread (tsan_abseil)
#   scripts/sanitize.sh thread-safety   clang's -Wthread-safety over every library and binary
# Extra arguments go to ctest. Installs clang when a mode needs it and it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
shift || true
scripts/setup.sh
jobs=${CONVOY_BUILD_JOBS:-$(nproc)}
common=(-DCMAKE_BUILD_TYPE=Release -DCONVOY_ENABLE_CUDA=OFF -DCONVOY_BUILD_BENCHMARKS=OFF)

# configure DIR GENERATOR cmake-arguments...: a build folder made by another generator is made anew
# (cmake refuses to switch generators in place).
configure() {
  local dir=$1 generator=$2
  shift 2
  if [ -f "$dir/CMakeCache.txt" ] &&
    ! grep -qx "CMAKE_GENERATOR:INTERNAL=$generator" "$dir/CMakeCache.txt"; then
    rm -rf "$dir"
  fi
  cmake -S . -B "$dir" -G "$generator" "${common[@]}" "$@" >/dev/null
}

need_clang() {
  command -v clang++ >/dev/null && return
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "sanitize: installing clang" >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends clang >/dev/null
}

# tsan_abseil: prints the prefix of Debian's abseil (the installed version, from its source
# package, Debian's patches applied) built as Debian builds it but with -fsanitize=thread, so that
# ThreadSanitizer sees absl::Mutex synchronise. Built once per version, under CONVOY_TSAN_CACHE.
tsan_abseil() {
  local version cache prefix work mirror apt_opts
  version=$(dpkg-query -W -f='${Version}' libabsl-dev)
  cache=${CONVOY_TSAN_CACHE:-/var/tmp/convoy-tsan}
  prefix=$cache/abseil-$version
  if [ ! -f "$prefix/.complete" ]; then
    echo "sanitize: building abseil $version with -fsanitize=thread into $prefix (once)" >&2
    work=$cache/work
    rm -rf "$work" "$prefix" && mkdir -p "$work/lists/partial"
    # The source package from this machine's Debian mirror, through a sources list of our own
    # (the machine's apt configuration is left as it is).
    mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null)
    [ -n "$mirror" ] ||
      mirror=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
    echo "deb-src ${mirror:-http://deb.debian.org/debian} bookworm main" >"$work/sources.list"
    apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
      -o "Dir::State::Lists=$work/lists")
    (cd "$work" && apt-get "${apt_opts[@]}" update -qq &&
      apt-get "${apt_opts[@]}" source -qq "abseil=$version") >&2
    # As debian/rules builds the shared libraries: C++17, the same options.h, the same sonames.
    cmake -S "$work"/abseil-*/ -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=ON -DCMAKE_INSTALL_PREFIX="$prefix" \
      -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_CXX_FLAGS="-fsanitize=thread -g1" \
      -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread >&2
    cmake --build "$work/build" -j "$jobs" >&2
    cmake --install "$work/build" >&2
    rm -rf "$work"
    touch "$prefix/.complete"
  fi
  echo "$prefix"
}

case "$mode" in
  asan)
    configure build-asan Ninja -DCONVOY_SANITIZE=address,undefined
    cmake --build build-asan -j "$jobs"
    # The default model, for the tests that run it (as scripts/test.sh fetches it).
    scripts/fetch-default-model.sh >/dev/null ||
      echo "sanitize: the default model could not be fetched: its tests will fail" >&2
    scripts/fetch-llamacpp-vocab.sh >/dev/null ||
      echo "sanitize: llama.cpp's test vocabularies could not be fetched: their tests will fail" >&2
    # halt_on_error: the first report fails the test that caused it.
    ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      ctest --test-dir build-asan --output-on-failure -j "$(nproc)" "$@"
    ;;
  tsan)
    absl_prefix=$(tsan_abseil)
    configure build-tsan Ninja -DCONVOY_SANITIZE=thread -DCMAKE_PREFIX_PATH="$absl_prefix"
    cmake --build build-tsan -j "$jobs" --target convoy_threaded_tests
    # The instrumented abseil for every library that loads it (gRPC's too). libgomp (GCC's OpenMP
    # runtime) is not instrumented, so the barrier ending each parallel region is invisible to TSan:
    # OMP_THREAD_LIMIT=1 runs every region on its calling thread alone, whatever the executor asks.
    # Left out: the determinism test on the real default model (minutes of one-thread arithmetic
    # under TSan, no threads to judge).
    LD_LIBRARY_PATH="$absl_prefix/lib" OMP_THREAD_LIMIT=1 \
      TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp" \
      ctest --test-dir build-tsan --output-on-failure -j "$(nproc)" -L threaded \
      -E 'GreedyDeterminismTest.*/default_' "$@"
    ;;
  thread-safety)
    need_clang
    # -O0: the analysis runs before any optimisation, which would only cost time here.
    CC=clang CXX=clang++ configure build-clang Ninja -DCONVOY_BUILD_TESTS=OFF \
      -DCONVOY_THREAD_SAFETY=ON -DCMAKE_C_FLAGS_RELEASE="-O0 -DNDEBUG" \
      -DCMAKE_CXX_FLAGS_RELEASE="-O0 -DNDEBUG"
    cmake --build build-clang -j "$jobs"
    ;;
  *)
    echo "usage: $0 asan|tsan|thread-safety [ctest arguments]" >&2
    exit 2
    ;;
esac
