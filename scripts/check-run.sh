#!/usr/bin/env bash
# The README's run command, checked as CI can: scripts/run.sh must set up, build, fetch the default
# model (or say loudly that it fell back to a random one), start convoyd, see it SERVING, answer one
# request (a chat answer on a real model), and then drain and exit 0 on SIGTERM. Prints the request
# and the answer.
# Usage: scripts/check-run.sh [seconds to wait for the answer, default 1800 (a first build)]
set -uo pipefail
cd "$(dirname "$0")/.."
limit=${1:-1800}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
CONVOY_PORT=${CONVOY_PORT:-50071} scripts/run.sh --metrics-port 0 --http-port 0 >"$log" 2>&1 &
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
# The request and its answer (a streamed answer may span lines), without the daemon's log lines
# (which may also land in the middle of the answer's line).
log_line='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z \[[a-z]+\] '
sed -n '/^+ convoy generate/,/convoyd serves on/p' "$log" | grep -Ev "^$log_line" |
  sed -E "s/$log_line.*$//" | sed '$d' >&2
if grep -q "COULD NOT BE FETCHED" "$log"; then
  echo "check-run: WARNING: the default model could not be fetched; a random model answered" >&2
fi
[ "$rc" -eq 0 ] || { echo "check-run: FAILED: exit $rc; the output:" >&2; cat "$log" >&2; exit 1; }
if [ -z "${CONVOY_MODEL:-}" ] && grep -q "the chat request failed" "$log"; then
  echo "check-run: FAILED: the chat request failed; the output:" >&2
  cat "$log" >&2
  exit 1
fi
