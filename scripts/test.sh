#!/usr/bin/env bash
# Sets up, builds, fetches the default model (once; daemon_default_model_test needs it) and
# llama.cpp's test vocabularies (once; llamacpp_vocab_test needs them) and runs every test.
# Usage: scripts/test.sh [ctest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
if ! scripts/fetch-default-model.sh >/dev/null; then
  echo "test.sh: the default model could not be fetched: daemon_default_model_test will fail" >&2
fi
if ! scripts/fetch-llamacpp-vocab.sh >/dev/null; then
  echo "test.sh: llama.cpp's test vocabularies could not be fetched: llamacpp_vocab_test will fail" >&2
fi
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" "$@"
