#!/usr/bin/env bash
# Sets up, builds, writes the default model (a small random-weight Llama until a real one ships)
# and generates from it in-process with convoy-run. Arguments are passed on to convoy-run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh >/dev/null
model_dir=${CONVOY_MODEL_DIR:-models/default}
if [ ! -f "$model_dir/config.json" ]; then
  build/src/tools/convoy-mkmodel --preset tiny --seed 1 --out "$model_dir"
fi
if [ $# -eq 0 ]; then
  set -- --token-ids 1,15,27,300,42 --token-ids 1,99,7 --max-tokens 16 --json
fi
exec build/src/tools/convoy-run --model "$model_dir" "$@"
