#!/usr/bin/env bash
# Configures and builds convoy in ./build (override with BUILD_DIR). Extra arguments go to cmake's
# configure step; whenever some are given the build is reconfigured with them (cmake keeps them in
# its cache for later plain calls).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
if [ ! -f "$build_dir/build.ninja" ] || [ $# -gt 0 ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
fi
cmake --build "$build_dir" -j "${CONVOY_BUILD_JOBS:-$(nproc)}"
