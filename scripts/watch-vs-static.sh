#!/usr/bin/env bash
# convoy-bench tune --watch against the best static config, on traffic that shifts between a
# chat-heavy and a long-prompt mix (issue 28), for docs/perf/cpu.md:
#   1. writes a request trace of PHASES phases of PHASE_S seconds each, alternating chat turns
#      (CHAT_RATE req/s, prompts of about 64 tokens, answers of about 48) and long prompts
#      (LONG_RATE req/s, 512 to 1,536 prompt tokens, answers of about 64), Poisson arrivals;
#   2. sweeps the space over the whole trace (one fresh convoyd per point, the trace replayed once
#      each): its best point is the best static config for this traffic;
#   3. REPEATS times, in turn: the trace replayed against a convoyd that starts on that best point
#      with `convoy-bench tune --watch` moving its knobs as the traffic shifts (an operator who
#      tuned once, then left the watch on), and against a fresh convoyd held on the best point;
#   4. prints both goodputs per repeat, their means and the ratio, the watch's moves, and the most
#      any watch could gain on this traffic (each mix swept alone: step 2b).
# Everything printed on stdout is Markdown; the rest goes to OUT_DIR. Run it on an otherwise idle
# machine: background load moves every figure.
#
# Environment (all optional): BUILD_DIR (build), OUT_DIR (a new /tmp/convoy-watch-*), MODEL
# (models/SmolLM2-135M-Instruct.Q4_1.gguf), PHASE_S (90), PHASES (4), CHAT_RATE (8), LONG_RATE
# (1.5), TTFT_MS (1000), ITL_MS (100), INTERVAL_S (the watch's --watch-interval-s: 15), DRAIN_S
# (10), REPEATS (2), SEED (1: the trace's), SPACE (the --set flags, one string), REUSE_SWEEP (1:
# take the sweep an earlier run left in OUT_DIR instead of sweeping again).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
out=${OUT_DIR:-$(mktemp -d /tmp/convoy-watch-XXXXXX)}
model=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
phase_s=${PHASE_S:-90}
phases=${PHASES:-4}
chat_rate=${CHAT_RATE:-8}
long_rate=${LONG_RATE:-1.5}
ttft_ms=${TTFT_MS:-1000}
itl_ms=${ITL_MS:-100}
interval=${INTERVAL_S:-15}
drain=${DRAIN_S:-10}
repeats=${REPEATS:-2}
seed=${SEED:-1}
# shellcheck disable=SC2206  # SPACE is split into its flags on purpose
space=(${SPACE:---set max_batch_size=4,32 --set max_queue_delay_microseconds=0,20000 --set max_num_batched_tokens=256,2048})
mkdir -p "$out"
bench=$build/bench/loadgen/convoy-bench
convoyd=$build/src/daemon/convoyd
base=configs/mixed.pbtxt
slo=(--ttft-ms "$ttft_ms" --itl-ms "$itl_ms")
[ -e "$model" ] || scripts/fetch-default-model.sh

# 1. The trace: every request at priority 1 (the base config's interactive level).
python3 - "$out/trace.jsonl" "$phase_s" "$phases" "$chat_rate" "$long_rate" "$seed" <<'EOF'
import json, math, random, sys
path, phase_s, phases, chat_rate, long_rate, seed = sys.argv[1:]
phase_s, phases, chat_rate, long_rate = float(phase_s), int(phases), float(chat_rate), float(long_rate)
rng = random.Random(int(seed))
def lognormal(median, sigma, lo, hi):
    return max(lo, min(hi, round(median * math.exp(rng.gauss(0, sigma)))))
lines = []
for p in range(phases):
    chat = p % 2 == 0
    t, end = p * phase_s, (p + 1) * phase_s
    while True:
        t += rng.expovariate(chat_rate if chat else long_rate)
        if t >= end:
            break
        if chat:
            prompt, output = lognormal(64, 0.6, 8, 256), lognormal(48, 0.5, 8, 160)
        else:
            prompt, output = rng.randint(512, 1536), lognormal(64, 0.4, 16, 128)
        lines.append({"arrival_s": round(t, 6), "prompt_tokens": prompt,
                      "output_tokens": output, "priority": 1})
with open(path, "w") as f:
    for line in lines:
        f.write(json.dumps(line) + "\n")
EOF
trace_s=$(echo "$phase_s * $phases" | bc)
echo "trace: $(wc -l <"$out/trace.jsonl") requests over $trace_s s" >&2

# 2. The best static config: a sweep of the space over the whole trace (or the one already in
# OUT_DIR with REUSE_SWEEP=1, made with the same settings).
if [ -n "${REUSE_SWEEP:-}" ] && [ -s "$out/sweep.json" ]; then
  echo "the sweep already in $out" >&2
  sweep_s=$(cat "$out/sweep-seconds")
else
  echo "sweep over the trace ..." >&2
  start=$(date +%s)
  "$bench" sweep --convoyd "$convoyd" --model "$model" --base-config "$base" \
    --trace "$out/trace.jsonl" --drain-s "$drain" "${slo[@]}" "${space[@]}" \
    --work-dir "$out/sweep" --json "$out/sweep.json" --markdown "$out/sweep.md" \
    --noprogress >"$out/sweep.txt" 2>"$out/sweep.err"
  sweep_s=$(($(date +%s) - start))
  echo "$sweep_s" >"$out/sweep-seconds"
fi
best=$(jq -r '.runs[.best].config' "$out/sweep.json")
# The sweep wrote each point's whole config (the base with its values) as config-N/config.pbtxt,
# N its place in the space, which is its run's with one load: what both runs below start from.
best_config=$out/sweep/config-$(jq -r '.best' "$out/sweep.json")/config.pbtxt
[ -s "$best_config" ] || { echo "no config for the best point: $best_config" >&2; exit 1; }
echo "best static point: $best" >&2

# 2b. Each mix alone (bench/workloads/chat.pbtxt and rag.pbtxt draw the trace's two mixes), the
# same space, PHASE_S a point: what each point gives each mix. The most any watch could gain is
# what knowing each mix's best point from the start gives (no trial, no transition): per mix the
# best point's goodput against the static best's, weighted by the mix's share of the phases.
mix_sweep() {  # NAME WORKLOAD RATE
  [ -n "${REUSE_SWEEP:-}" ] && [ -s "$out/mix-$1.json" ] && return 0
  echo "sweep of the $1 mix alone ..." >&2
  "$bench" sweep --convoyd "$convoyd" --model "$model" --base-config "$base" --workload "$2" \
    --rate "$3" --duration-s "$phase_s" --drain-s "$drain" "${slo[@]}" "${space[@]}" \
    --work-dir "$out/mix-$1" --json "$out/mix-$1.json" --markdown "$out/mix-$1.md" \
    --noprogress >"$out/mix-$1.txt" 2>&1
}
mix_sweep chat bench/workloads/chat.pbtxt "$chat_rate"
mix_sweep long bench/workloads/rag.pbtxt "$long_rate"
chat_phases=$(((phases + 1) / 2))
long_phases=$((phases / 2))
goodput_of() { jq -r ".runs[$2].classes[-1].goodput_rps * 1000 | round / 1000" "$out/mix-$1.json"; }
best_of() { jq -r '.runs[.best].classes[-1].goodput_rps * 1000 | round / 1000' "$out/mix-$1.json"; }
best_index=$(jq -r '.best' "$out/sweep.json")
oracle=$(echo "($(best_of chat) * $chat_phases + $(best_of long) * $long_phases) / $phases" | bc -l)
static_mixes=$(echo "($(goodput_of chat "$best_index") * $chat_phases + \
  $(goodput_of long "$best_index") * $long_phases) / $phases" | bc -l)

# start_convoyd CONFIG DIR: a convoyd on CONFIG, its ports in DIR; sets pid.
start_convoyd() {
  local config=$1 dir=$2
  mkdir -p "$dir"
  "$convoyd" --config "$config" --model "$model" --port 0 --port-file "$dir/port" \
    --http-port 0 --http-port-file "$dir/http-port" --metrics-port 0 >"$dir/convoyd.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    grep -q "SERVING model" "$dir/convoyd.log" 2>/dev/null && [ -s "$dir/http-port" ] && return 0
    sleep 0.1
  done
  echo "convoyd did not start; see $dir/convoyd.log" >&2
  return 1
}
stop_convoyd() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
pid=""
trap '[ -z "$pid" ] || kill "$pid" 2>/dev/null || true' EXIT
# replay DIR SEED: the trace against the convoyd in DIR, prompts drawn from SEED; prints its
# goodput.
replay() {
  local dir=$1 run_seed=$2
  "$bench" run --addr "127.0.0.1:$(cat "$dir/port")" --trace "$out/trace.jsonl" \
    --drain-s "$drain" "${slo[@]}" --seed "$run_seed" --json "$dir/run.json" --noprogress \
    >"$dir/run.txt" 2>&1
  jq -r '.classes[-1].goodput_rps * 1000 | round / 1000' "$dir/run.json"
}

# 3. Watch and static in turn, each on a fresh convoyd, new prompts per repeat.
watch_goodput=()
static_goodput=()
for r in $(seq "$repeats"); do
  echo "repeat $r: watch ..." >&2
  dir=$out/watch-$r
  mkdir -p "$dir"
  cp "$best_config" "$dir/live.pbtxt"
  start_convoyd "$dir/live.pbtxt" "$dir"
  "$bench" tune --watch --addr "127.0.0.1:$(cat "$dir/port")" \
    --http-addr "127.0.0.1:$(cat "$dir/http-port")" --config "$dir/live.pbtxt" --pid "$pid" \
    --ttft-p99 "$ttft_ms" --itl-p99 "$itl_ms" "${space[@]}" --watch-interval-s "$interval" \
    --watch-for-s "$(echo "$trace_s + $drain" | bc)" --noprogress >"$dir/watch.txt" 2>&1 &
  watcher=$!
  watch_goodput+=("$(replay "$dir" $((100 + r)))")
  wait "$watcher" || true
  stop_convoyd

  echo "repeat $r: static ..." >&2
  dir=$out/static-$r
  start_convoyd "$best_config" "$dir"
  static_goodput+=("$(replay "$dir" $((100 + r)))")
  stop_convoyd
done

# 4. The table.
mean() { printf '%s\n' "$@" | awk '{s += $1} END {if (NR) printf "%.3f", s / NR}'; }
watch_mean=$(mean "${watch_goodput[@]}")
static_mean=$(mean "${static_goodput[@]}")
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "### convoy-bench tune --watch against the best static config (CPU)"
echo
echo "Machine: $cpu, $(nproc) cores. Model: $model. Base config $base."
echo "Trace: $(wc -l <"$out/trace.jsonl") requests, $phases phases of $phase_s s alternating chat"
echo "($chat_rate req/s) and long prompts ($long_rate req/s). Goodput: completed requests/s with"
echo "TTFT <= $ttft_ms ms and mean inter-token latency <= $itl_ms ms. Space: ${space[*]}."
echo "Sweep over the trace: $sweep_s s; best static point: $best. Watch interval: $interval s."
echo
if [ "$repeats" -gt 0 ]; then
  echo "| repeat | goodput, watch | goodput, static best | watch / static |"
  echo "|---|---|---|---|"
  for i in "${!watch_goodput[@]}"; do
    echo "| $((i + 1)) | ${watch_goodput[$i]} | ${static_goodput[$i]} |" \
      "$(echo "scale=3; ${watch_goodput[$i]} / ${static_goodput[$i]}" | bc) |"
  done
  echo "| mean | $watch_mean | $static_mean | $(echo "scale=3; $watch_mean / $static_mean" | bc) |"
  echo
fi
echo "Each mix alone (PHASE_S a point; the static best point is $best):"
echo
echo "| mix | best point | its goodput | the static best's goodput |"
echo "|---|---|---|---|"
for mix in chat long; do
  echo "| $mix | $(jq -r '.runs[.best].config' "$out/mix-$mix.json") | $(best_of $mix) |" \
    "$(goodput_of $mix "$best_index") |"
done
echo
echo "The most a watch could gain here (each mix's best point in force for the whole of its phases,"
echo "against the static best's, both from the runs of each mix alone): $(printf '%.3f' \
  "$(echo "$oracle / $static_mixes" | bc -l)")x."
echo
echo "The sweep's points over the whole trace:"
echo
cat "$out/sweep.md"
echo
if [ "$repeats" -gt 0 ]; then
  echo "The watch's moves (repeat 1):"
  echo
  echo '```'
  grep -i "move\|regime\|back to\|neighbour" "$out/watch-1/watch.txt" || echo "(none)"
  echo '```'
  echo
fi
echo "Outputs in $out."
