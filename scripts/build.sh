#!/usr/bin/env bash
# Configures and builds convoy in ./build (override with BUILD_DIR). Extra arguments go to cmake's
# configure step; whenever some are given the build is reconfigured with them (cmake keeps them in
# its cache for later plain calls). A new build folder uses Ninja, or the generator CMAKE_GENERATOR
# names (as cmake itself reads it; CI's fresh root builds with "Unix Makefiles", so that the build
# is checked under CMake's default generator too); a folder already configured keeps its own.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
if { [ ! -f "$build_dir/build.ninja" ] && [ ! -f "$build_dir/Makefile" ]; } || [ $# -gt 0 ]; then
  generator=()
  [ -f "$build_dir/CMakeCache.txt" ] || generator=(-G "${CMAKE_GENERATOR:-Ninja}")
  cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
fi
cmake --build "$build_dir" -j "${CONVOY_BUILD_JOBS:-$(nproc)}"
