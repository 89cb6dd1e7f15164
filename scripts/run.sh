#!/usr/bin/env bash
# Sets up, builds, writes the default model (a small random-weight Llama until a real one ships)
# and runs convoyd on it (the GPU when there is one, the CPU otherwise), on 127.0.0.1:50051 with
# metrics on :8002. Once it serves, one `convoy generate` call shows it working; the daemon then
# stays in the foreground until Ctrl-C (SIGINT drains and exits 0). Arguments go to convoyd.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh >/dev/null
model_dir=${CONVOY_MODEL_DIR:-models/default}
if [ ! -f "$model_dir/config.json" ]; then
  build/src/tools/convoy-mkmodel --preset tiny --seed 1 --out "$model_dir"
fi
addr=127.0.0.1:${CONVOY_PORT:-50051}
build/src/daemon/convoyd --config configs/default.pbtxt --model "$model_dir" \
  --listen-address 127.0.0.1 --port "${addr##*:}" "$@" &
daemon=$!
trap 'kill -INT $daemon 2>/dev/null; wait $daemon; exit $?' INT TERM
for _ in $(seq 1 300); do
  build/src/daemon/convoy health --addr "$addr" >/dev/null 2>&1 && break
  kill -0 $daemon 2>/dev/null || { wait $daemon; exit 1; }
  sleep 0.2
done
echo "+ convoy generate --addr $addr --token-ids 1,15,27,300,42 --max-tokens 16 --stream" >&2
build/src/daemon/convoy generate --addr "$addr" --token-ids 1,15,27,300,42 --max-tokens 16 --stream
echo "convoyd serves on $addr (metrics: http://127.0.0.1:8002/metrics); Ctrl-C stops it." >&2
wait $daemon
