#!/usr/bin/env bash
# Sets up, builds, fetches the default model (once; daemon_default_model_test needs it) and runs
# every test. Usage: scripts/test.sh [ctest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
if ! scripts/fetch-default-model.sh >/dev/null; then
  echo "test.sh: the default model could not be fetched: daemon_default_model_test will fail" >&2
fi
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" "$@"
