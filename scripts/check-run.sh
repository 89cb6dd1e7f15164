#!/usr/bin/env bash
# The README's run command, checked as CI can: scripts/run.sh must set up, build, start convoyd,
# see it SERVING, answer one request, and then drain and exit 0 on SIGTERM.
# Usage: scripts/check-run.sh [seconds to wait for the answer, default 1800 (a first build)]
set -uo pipefail
cd "$(dirname "$0")/.."
limit=${1:-1800}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
CONVOY_PORT=${CONVOY_PORT:-50071} scripts/run.sh --metrics-port 0 >"$log" 2>&1 &
pid=$!
start=$SECONDS
answered=0
while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - start)) -lt "$limit" ]; do
  if grep -q "convoyd serves on" "$log"; then answered=1; break; fi
  sleep 1
done
if [ "$answered" -ne 1 ]; then
  echo "check-run: FAILED: no answer after $((SECONDS - start)) s; the output:" >&2
  cat "$log" >&2
  kill -TERM "$pid" 2>/dev/null
  exit 1
fi
kill -TERM "$pid"
wait "$pid"
rc=$?
echo "check-run: answered after $((SECONDS - start)) s; run.sh exited $rc after SIGTERM" >&2
grep -A2 '^+ convoy generate' "$log" >&2
[ "$rc" -eq 0 ] || { echo "check-run: FAILED: exit $rc; the output:" >&2; cat "$log" >&2; exit 1; }
