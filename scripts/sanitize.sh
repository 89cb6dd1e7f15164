#!/usr/bin/env bash
# Runs the tests under sanitizers, each in its own CPU build folder:
#   scripts/sanitize.sh asan            every test under AddressSanitizer + UndefinedBehaviorSanitizer
#                                       (clang)
#   scripts/sanitize.sh tsan            the tests labelled "threaded" (engine, scheduler, HTTP
#                                       server, front ends, daemon; tests/CMakeLists.txt) under
#                                       ThreadSanitizer, over Debian's abseil and gRPC built with
#                                       -fsanitize=thread (tsan_abseil, tsan_grpc)
#   scripts/sanitize.sh thread-safety   clang's -Wthread-safety over every library and binary
# Extra arguments go to ctest. Installs clang when a mode needs it and it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
shift || true
scripts/setup.sh
jobs=${CONVOY_BUILD_JOBS:-$(nproc)}
tsan_cache=${CONVOY_TSAN_CACHE:-/var/tmp/convoy-tsan}
common=(-DCMAKE_BUILD_TYPE=Release -DCONVOY_ENABLE_CUDA=OFF -DCONVOY_BUILD_BENCHMARKS=OFF)

# configure DIR GENERATOR cmake-arguments...: a build folder made by another generator or C++
# compiler ($CXX, else c++) is made anew (cmake switches neither in place).
configure() {
  local dir=$1 generator=$2 compiler
  shift 2
  compiler=$(command -v "${CXX:-c++}")
  if [ -f "$dir/CMakeCache.txt" ] &&
    { ! grep -qx "CMAKE_GENERATOR:INTERNAL=$generator" "$dir/CMakeCache.txt" ||
      ! grep -qx "CMAKE_CXX_COMPILER:FILEPATH=$compiler" "$dir/CMakeCache.txt"; }; then
    rm -rf "$dir"
  fi
  cmake -S . -B "$dir" -G "$generator" "${common[@]}" "$@" >/dev/null
}

# clang and LLVM's OpenMP runtime (the CPU executor links OpenMP; clang's -fopenmp needs libomp,
# which Debian's clang package does not pull in).
need_clang() {
  command -v clang++ >/dev/null && dpkg -s libomp-dev >/dev/null 2>&1 && return
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "sanitize: installing clang and libomp-dev" >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    clang libomp-dev >/dev/null
}

# debian_source PACKAGE VERSION DIR: unpacks the source package PACKAGE=VERSION (Debian's patches
# applied) into DIR, from this machine's Debian mirror, through a sources list of our own (the
# machine's apt configuration is left as it is).
debian_source() {
  local package=$1 version=$2 work=$3 mirror apt_opts
  rm -rf "$work" && mkdir -p "$work/lists/partial"
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null)
  [ -n "$mirror" ] ||
    mirror=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
  echo "deb-src ${mirror:-http://deb.debian.org/debian} bookworm main" >"$work/sources.list"
  apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$work/lists")
  (cd "$work" && apt-get "${apt_opts[@]}" update -qq &&
    apt-get "${apt_opts[@]}" source -qq "$package=$version") >&2
}

# The instrumented abseil and gRPC at -O1, as our own sanitized build (cmake/ConvoySanitizers.cmake):
# Release's -O3 compiles them far more slowly under TSan, and they are built on every new machine.
tsan_flags=(-DCMAKE_C_FLAGS="-fsanitize=thread -g1" -DCMAKE_CXX_FLAGS="-fsanitize=thread -g1"
  -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG"
  -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread)
if command -v ccache >/dev/null; then
  tsan_flags+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

# tsan_abseil: prints the prefix of Debian's abseil (the installed version, from its source
# package) built as Debian builds it but with -fsanitize=thread, so that ThreadSanitizer sees
# absl::Mutex synchronise. Built once per version, under CONVOY_TSAN_CACHE.
tsan_abseil() {
  local version prefix work
  version=$(dpkg-query -W -f='${Version}' libabsl-dev)
  prefix=$tsan_cache/abseil-$version
  if [ ! -f "$prefix/.complete" ]; then
    echo "sanitize: building abseil $version with -fsanitize=thread into $prefix (once)" >&2
    work=$tsan_cache/work
    rm -rf "$prefix"
    debian_source abseil "$version" "$work"
    # As debian/rules builds the shared libraries: C++17, the same options.h, the same sonames.
    cmake -S "$work"/abseil-*/ -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=ON -DCMAKE_INSTALL_PREFIX="$prefix" \
      -DCMAKE_INSTALL_LIBDIR=lib "${tsan_flags[@]}" >&2
    cmake --build "$work/build" -j "$jobs" >&2
    cmake --install "$work/build" >&2
    rm -rf "$work"
    touch "$prefix/.complete"
  fi
  echo "$prefix"
}

# tsan_grpc ABSEIL_PREFIX: prints the prefix of Debian's gRPC core and C++ libraries (libgpr,
# libupb, libaddress_sorting, libgrpc, libgrpc++: the installed version, from its source package)
# built with -fsanitize=thread over the instrumented abseil, with Debian's options and sonames, so
# that ThreadSanitizer sees the hand-offs between gRPC's threads (its lock-free queues, its
# combiners) that order our reactors' callbacks. Built once per version, under CONVOY_TSAN_CACHE:
# about 10 minutes on 2 cores. The code generator and the libraries we do not load stay Debian's.
tsan_grpc() {
  local absl_prefix=$1 version prefix work
  version=$(dpkg-query -W -f='${source:Version}' libgrpc++-dev)
  prefix=$tsan_cache/grpc-$version
  if [ ! -f "$prefix/.complete" ]; then
    echo "sanitize: building gRPC $version with -fsanitize=thread into $prefix (once)" >&2
    work=$tsan_cache/work
    rm -rf "$prefix"
    debian_source grpc "$version" "$work"
    # debian/rules' COMMON_BUILD_FLAGS, less the plugins. grpc_plugin_support is configured
    # whatever the options say and wants libprotoc, which only the code generator links: it is
    # pointed at the runtime library and never built.
    cmake -S "$work"/grpc-*/ -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=ON -DgRPC_BUILD_TESTS=OFF \
      -DCMAKE_PREFIX_PATH="$absl_prefix" -DgRPC_ABSL_PROVIDER=package \
      -DgRPC_CARES_PROVIDER=package -DgRPC_PROTOBUF_PROVIDER=package -DgRPC_RE2_PROVIDER=package \
      -DgRPC_SSL_PROVIDER=package -DgRPC_ZLIB_PROVIDER=package \
      -DgRPC_BACKWARDS_COMPATIBILITY_MODE=OFF -DgRPC_BUILD_CODEGEN=OFF \
      -DProtobuf_PROTOC_LIBRARY="$(ls /usr/lib/*/libprotoc.so.* | head -n 1)" \
      "${tsan_flags[@]}" >&2
    cmake --build "$work/build" -j "$jobs" --target grpc++ >&2
    mkdir -p "$prefix/lib"
    cp -P "$work"/build/lib*.so.* "$prefix/lib/"
    rm -rf "$work"
    touch "$prefix/.complete"
  fi
  echo "$prefix"
}

# reports_in DIR: an empty DIR/sanitizer-reports, its absolute path printed. Each sanitized process
# writes its reports to a file of its own there (log_path: NAME.PID), so a report from a process
# whose stderr a test discards (a client or daemon the test runs) is kept; .ci/run shows them.
reports_in() {
  rm -rf "$1/sanitizer-reports"
  mkdir -p "$1/sanitizer-reports"
  echo "$PWD/$1/sanitizer-reports"
}
# show_reports DIR: prints the reports under DIR, each file's first 80 lines.
show_reports() {
  local file
  for file in "$1"/*; do
    [ -f "$file" ] || continue
    echo "=== sanitize: report $file" >&2
    head -n 80 "$file" >&2
  done
}

rc=0
case "$mode" in
  asan)
    # clang: it compiles the instrumented sources in about 84% of gcc's time, gcc's precompiled
    # test header included (measured: 12 files of src/frontend, src/http and tests/frontend at -O1,
    # one at a time, 95 s against 114 s), and CI builds every test this way on every run. gcc
    # remains the compiler of every other build, TSan's included.
    need_clang
    CC=clang CXX=clang++ configure build-asan Ninja -DCONVOY_SANITIZE=address,undefined
    cmake --build build-asan -j "$jobs"
    # The default model, for the tests that run it (as scripts/test.sh fetches it).
    scripts/fetch-default-model.sh >/dev/null ||
      echo "sanitize: the default model could not be fetched: its tests will fail" >&2
    scripts/fetch-llamacpp-vocab.sh >/dev/null ||
      echo "sanitize: llama.cpp's test vocabularies could not be fetched: their tests will fail" >&2
    # halt_on_error: the first report fails the test that caused it.
    reports=$(reports_in build-asan)
    ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:log_path=$reports/asan \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan \
      ctest --test-dir build-asan --output-on-failure -j "$(nproc)" "$@" || rc=$?
    show_reports "$reports"
    ;;
  tsan)
    absl_prefix=$(tsan_abseil)
    grpc_prefix=$(tsan_grpc "$absl_prefix")
    configure build-tsan Ninja -DCONVOY_SANITIZE=thread -DCMAKE_PREFIX_PATH="$absl_prefix"
    cmake --build build-tsan -j "$jobs" --target convoy_threaded_tests
    # The instrumented abseil and gRPC for every binary and library that loads them (the tests link
    # Debian's, whose sonames these carry; convoyd, started by the daemon tests, inherits the
    # environment). libgomp (GCC's OpenMP runtime) is not instrumented, so the barrier ending each
    # parallel region is invisible to TSan: OMP_THREAD_LIMIT=1 runs every region on its calling
    # thread alone, whatever the executor asks. Left out: the determinism test on the real default
    # model (minutes of one-thread arithmetic under TSan, no threads to judge).
    scripts/fetch-default-model.sh >/dev/null ||
      echo "sanitize: the default model could not be fetched: its tests will fail" >&2
    reports=$(reports_in build-tsan)
    LD_LIBRARY_PATH="$grpc_prefix/lib:$absl_prefix/lib" OMP_THREAD_LIMIT=1 \
      TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp:log_path=$reports/tsan" \
      ctest --test-dir build-tsan --output-on-failure -j "$(nproc)" -L threaded \
      -E 'GreedyDeterminismTest.*/default_' "$@" || rc=$?
    show_reports "$reports"
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
exit "$rc"
