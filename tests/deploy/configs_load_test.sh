#!/usr/bin/env bash
# ctest: every server config the image and the Kubernetes manifests ship (configs/docker.pbtxt,
# deploy/kubernetes/**/*.pbtxt) loads in convoyd. Given the config and a model path that does not
# exist, convoyd must get past the config (it refuses a bad one with exit 2 and the file, line and
# field) and stop at the model (exit 1, naming the path).
# Usage: tests/deploy/configs_load_test.sh CONVOYD REPO_ROOT
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 CONVOYD REPO_ROOT" >&2; exit 2; }
convoyd=$(realpath "$1")
[ -x "$convoyd" ] || { echo "FAILED: $1 is not an executable convoyd" >&2; exit 1; }
cd "$2"
model=/nonexistent/convoy-configs-load-test.gguf
mapfile -t configs < <(echo configs/docker.pbtxt; find deploy/kubernetes -name '*.pbtxt' | sort)
[ ${#configs[@]} -ge 4 ] || { echo "FAILED: found only ${configs[*]}" >&2; exit 1; }
failed=0
for config in "${configs[@]}"; do
  set +e
  out=$(timeout 120 "$convoyd" --config "$config" --model "$model" --listen-address 127.0.0.1 \
    --port 0 --metrics-port 0 2>&1)
  rc=$?
  set -e
  if [ "$rc" -eq 1 ] && grep -qF "$model" <<<"$out"; then
    echo "ok: $config loads"
  elif [ "$rc" -eq 2 ]; then
    echo "FAILED: convoyd refuses $config: $(grep -v '^Try ' <<<"$out" | tail -3)"
    failed=1
  else
    echo "FAILED: convoyd with $config and the missing model $model exited $rc, not 1 naming the model; its output:"
    tail -20 <<<"$out"
    failed=1
  fi
done
exit "$failed"
