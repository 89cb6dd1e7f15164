#!/usr/bin/env bash
# Fairness: how long one client's requests wait in the queue while another client floods the same
# priority level, for docs/reliability.md. Starts one convoyd on the default model
# (SmolLM2-135M-Instruct) with configs/default.pbtxt plus two API keys ("flood" and "victim"),
# request_limits.max_in_flight_per_client 64 and a max_batch_size of MAX_BATCH (16), so that the
# flood's requests overflow the running batch into the queue. Then, with convoy-bench over convoy's
# gRPC API and bench/workloads/fairness.pbtxt (prompts of 16-64 tokens, 24-40 output tokens):
#   a. alone: the victim, VICTIM_REQUESTS (30) requests one at a time with its own key;
#   b. fair: a closed loop of FLOOD_CONCURRENCY (63) requests with the flood's key, and once its
#      backlog is queued, the victim as in (a) with its own key;
#   c. fifo: the same flood, and the victim's requests sent with the FLOOD's key: one client, served
#      in arrival order, as first-come-first-served would serve both (the victim queued behind the
#      flood's backlog).
# The flood runs 63, not 64, so that in (c) the victim's one request fits under the flood key's
# limit of 64. Each flood is stopped (SIGTERM) once the victim is done, and the server left to
# drain. Prints a Markdown table: per phase the victim's requests completed, its queue time as the
# server measured it (InferResponse timings) p50/p99, its TTFT p50/p99 and inter-token latency
# p50, the engine's step time while the victim ran (the time over the steps counted in
# convoy_nv_inference_exec_count: the engine never idles during a flood) and the rows per step,
# and the victim's queue p99 in steps; then the check: queue p99 in (b) at most 2 steps. Builds
# nothing.
#
#   scripts/fairness.sh [BUILD_DIR]
#
# BUILD_DIR (default: build) must hold convoyd and convoy-bench. Environment (all optional):
# FLOOD_CONCURRENCY (63), VICTIM_REQUESTS (30), FIFO_REQUESTS (the victim's requests in c, where
# each waits for the flood's whole backlog; default VICTIM_REQUESTS), MAX_BATCH (16), OUT_DIR (a new
# /tmp/convoy-fairness-*: config, JSON, logs, metrics), SERVER_CPUS and CLIENT_CPUS (taskset
# lists, as in overload.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 1 ]; then
  echo "usage: $0 [BUILD_DIR]" >&2
  exit 2
fi
build_arg=${1:-build}
if [ ! -d "$build_arg" ]; then
  echo "$0: no build directory $build_arg" >&2
  exit 2
fi
build=$(cd "$build_arg" && pwd)
flood_concurrency=${FLOOD_CONCURRENCY:-63}
victim_requests=${VICTIM_REQUESTS:-30}
fifo_requests=${FIFO_REQUESTS:-$victim_requests}
max_batch=${MAX_BATCH:-16}
workload=bench/workloads/fairness.pbtxt
out=${OUT_DIR:-$(mktemp -d /tmp/convoy-fairness-XXXXXX)}
mkdir -p "$out"
bench=$build/bench/loadgen/convoy-bench
convoyd=$build/src/daemon/convoyd
# shellcheck source=scripts/lib/serving.sh
. scripts/lib/serving.sh
need_executables "$build_arg" "$bench" "$convoyd"
model=$(scripts/fetch-default-model.sh)

# Loopback only, for this run: the keys are no secret.
flood_key=fairness-flood-key-0123456789
victim_key=fairness-victim-key-0123456789
config=$out/config.pbtxt
python3 - configs/default.pbtxt "$config" "$max_batch" "$flood_key" "$victim_key" <<'PY'
import re, sys
src, dst, batch, flood, victim = sys.argv[1:]
text = open(src).read()
text, n = re.subn(r"^(\s*)max_batch_size: \d+", rf"\g<1>max_batch_size: {batch}", text, count=1,
                  flags=re.M)
assert n == 1, "no max_batch_size in " + src
keys = (f'  api_key {{ name: "flood" key: "{flood}" }}\n'
        f'  api_key {{ name: "victim" key: "{victim}" }}\n')
text, n = re.subn(r"^frontend \{\n", lambda m: m.group(0) + keys, text, count=1, flags=re.M)
assert n == 1, "no frontend block in " + src
text += "\nrequest_limits {\n  max_in_flight_per_client: 64\n}\n"
open(dst, "w").write(text)
PY

client_pin=()
[ -n "${CLIENT_CPUS:-}" ] && client_pin=(taskset -c "$CLIENT_CPUS")
flood_pid=""
stop_flood() {
  if [ -n "$flood_pid" ]; then
    kill -TERM "$flood_pid" 2>/dev/null || true
    wait "$flood_pid" 2>/dev/null || true
    flood_pid=""
  fi
}
stop_all() {
  stop_flood
  stop_convoyd
}
trap stop_all EXIT
start_convoyd "$convoyd" "$out" "$config" "$model"
addr=$convoyd_addr

# metrics NAME...: the sum of each named metric's series in convoyd's /metrics, one per line.
metrics() {
  python3 - "http://$convoyd_http/metrics" "$@" <<'PY'
import sys, urllib.request
text = urllib.request.urlopen(sys.argv[1], timeout=30).read().decode()
sums = {name: 0.0 for name in sys.argv[2:]}
for line in text.splitlines():
    if line.startswith("#") or not line.strip():
        continue
    series, value = line.rsplit(" ", 1)
    name = series.split("{", 1)[0]
    if name in sums:
        sums[name] += float(value)
print("\n".join(f"{sums[n]:.0f}" for n in sys.argv[2:]))
PY
}
# snapshot FILE: the time, the steps and rows so far, and the requests waiting, on one line.
snapshot() {
  echo "$(date +%s.%N) $(metrics convoy_nv_inference_exec_count convoy_nv_inference_count \
    convoy_num_requests_waiting | tr '\n' ' ')" >"$1"
}
# wait_for COUNT_EXPR SECONDS WHAT: polls until python's COUNT_EXPR over `waiting` and `running`
# holds; exits 1 after SECONDS.
wait_for() {
  local expr=$1 seconds=$2 what=$3 values
  for _ in $(seq "$((seconds * 2))"); do
    values=$(metrics convoy_num_requests_waiting convoy_num_requests_running | tr '\n' ' ')
    # shellcheck disable=SC2086  # $values: two words
    if python3 -c "import sys; waiting, running = map(float, sys.argv[1:3]); \
sys.exit(0 if ($expr) else 1)" $values; then
      return 0
    fi
    if [ -n "$flood_pid" ] && ! kill -0 "$flood_pid" 2>/dev/null; then
      echo "$0: the flood's convoy-bench exited; see $out/*-flood.err" >&2
      exit 1
    fi
    sleep 0.5
  done
  echo "$0: $what not reached in $seconds s (waiting, running: $values)" >&2
  exit 1
}

bench_run() {  # bench_run NAME convoy-bench-run-arguments...
  local name=$1
  shift
  "${client_pin[@]}" "$bench" run --addr "$addr" --workload "$workload" --label "$name" \
    --noprogress --drain-s 600 --json "$out/$name.json" "$@" >"$out/$name.txt" 2>"$out/$name.err"
}
victim() {  # victim PHASE KEY SEED REQUESTS [convoy-bench-run-arguments...]
  local phase=$1 key=$2 seed=$3 requests=$4
  shift 4
  echo "$phase: the victim's $requests requests ..." >&2
  snapshot "$out/$phase-start.txt"
  bench_run "$phase" --concurrency 1 --requests "$requests" --api-key "$key" \
    --seed "$seed" "$@"
  snapshot "$out/$phase-end.txt"
}
start_flood() {  # start_flood PHASE SEED: the flood in the background, its backlog queued
  local phase=$1 seed=$2
  echo "$phase: the flood ($flood_concurrency in flight) ..." >&2
  # Not through bench_run: $! must be convoy-bench itself (taskset execs it), not a subshell.
  "${client_pin[@]}" "$bench" run --addr "$addr" --workload "$workload" --label "$phase-flood" \
    --noprogress --concurrency "$flood_concurrency" --duration-s 86400 --warmup 0 \
    --api-key "$flood_key" --seed "$seed" >"$out/$phase-flood.txt" 2>"$out/$phase-flood.err" &
  flood_pid=$!
  wait_for "running >= $max_batch and waiting >= $((flood_concurrency - max_batch)) - 4" 300 \
    "the flood's backlog"
}
end_flood() {
  stop_flood
  wait_for "waiting + running == 0" 120 "an idle server after the flood"
}

# Each phase draws other prompts (--seed), so that none finds another's in the prefix cache.
victim alone "$victim_key" 201 "$victim_requests"
start_flood fair 301
victim fair "$victim_key" 202 "$victim_requests" --warmup 0
end_flood
start_flood fifo 302
victim fifo "$flood_key" 203 "$fifo_requests" --warmup 0
end_flood
stop_all
trap - EXIT

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
echo "Machine: $cpu, $(nproc) cores. Model: SmolLM2-135M-Instruct (Q4_1 GGUF). Config:"
echo "configs/default.pbtxt with max_batch_size $max_batch, two API keys and"
echo "max_in_flight_per_client 64. Workload: $workload over convoy's gRPC API; the flood"
echo "$flood_concurrency in flight; the victim's requests one at a time ($victim_requests alone and"
echo "beside the flood, $fifo_requests with the flood's key). Results: $out."
echo
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
def window(phase):
    a = [float(x) for x in open(f"{out}/{phase}-start.txt").read().split()]
    b = [float(x) for x in open(f"{out}/{phase}-end.txt").read().split()]
    steps, rows = b[1] - a[1], b[2] - a[2]
    return b[0] - a[0], steps, rows, a[3], b[3]
phases = [("alone", "victim", "victim alone"),
          ("fair", "victim", "flood + victim, own keys (fair share)"),
          ("fifo", "flood", "flood + victim, flood's key (FIFO)")]
print("| phase | victim's key | completed | queue p50 / p99 ms | TTFT p50 / p99 ms | ITL p50 ms "
      "| step ms | rows per step | waiting at start / end | queue p99 in steps |")
print("|---|---|---|---|---|---|---|---|---|---|")
results = {}
for phase, key, title in phases:
    a = next(c for c in json.load(open(f"{out}/{phase}.json"))["classes"] if c["name"] == "all")
    seconds, steps, rows, waiting0, waiting1 = window(phase)
    ms = lambda s, p: float("nan") if s.get(p) is None else s[p] * 1e3
    queue, ttft, itl = a["server_queue_s"], a["ttft_s"], a["itl_s"]
    # Alone, the engine idles between requests: its step is the victim's own inter-token time.
    steps = steps or float("nan")
    step = ms(itl, "p50") if phase == "alone" else seconds / steps * 1e3
    in_steps = ms(queue, "p99") / step
    results[phase] = (a, step, in_steps)
    print(f"| {title} | {key} | {a['completed']} of {a['sent']} "
          f"| {ms(queue, 'p50'):.1f} / {ms(queue, 'p99'):.1f} "
          f"| {ms(ttft, 'p50'):.0f} / {ms(ttft, 'p99'):.0f} | {ms(itl, 'p50'):.1f} "
          f"| {step:.1f} | {rows / steps:.1f} | {waiting0:.0f} / {waiting1:.0f} | {in_steps:.2f} |")
print()
a, step, in_steps = results["fair"]
print(f"- fair share: the victim's queue p99 is {in_steps:.2f} steps of {step:.1f} ms: "
      f"{'met' if in_steps <= 2 else 'NOT met'} (target: at most 2 steps)")
alone = results["alone"][0]["ttft_s"]["p50"]
for phase in ("fair", "fifo"):
    t = results[phase][0]["ttft_s"]["p50"]
    print(f"- {phase}: the victim's TTFT p50 {t * 1e3:.0f} ms, {t / alone:.1f}x its TTFT alone "
          f"({alone * 1e3:.0f} ms)")
failed = sum(r[0]["failed"] for r in results.values())
print(f"- the victim's failed requests, all phases: {failed}")
PY
