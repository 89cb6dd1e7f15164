#!/usr/bin/env bash
# convoy-bench tune against an exhaustive sweep of the same space, for docs/perf/cpu.md: on MODEL
# (or a small random Llama it writes),
#   1. sweeps the space (one fresh convoyd per point, DURATION_S of the mixed workload each) and
#      times it;
#   2. starts one convoyd and tunes it live over the same space within BUDGET_S (default: a
#      quarter of the sweep's time);
#   3. measures the sweep's best and tune's best again, in three fresh runs each (a new convoyd and
#      new prompts per run), and prints the goodput ratio and the time ratio.
# Everything printed on stdout is Markdown; the rest goes to OUT_DIR. Run it on an otherwise idle
# machine: background load moves every figure.
#
# Environment (all optional): BUILD_DIR (build), OUT_DIR (a new /tmp/convoy-tune-*), RATE (6
# req/s), DURATION_S (10), DRAIN_S (5: the most a run waits for requests in flight), BUDGET_S,
# MIN_RUN_S (3), MIN_RUN_REQUESTS (30: tune's shortest run holds this many arrivals), TTFT_MS
# (500), ITL_MS (100), MODEL (a model directory or .gguf file, e.g.
# models/SmolLM2-135M-Instruct.Q4_1.gguf; default: a random model made with MODEL_ARGS,
# convoy-mkmodel's flags, by default the tiny preset).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
out=${OUT_DIR:-$(mktemp -d /tmp/convoy-tune-XXXXXX)}
rate=${RATE:-6}
duration=${DURATION_S:-10}
min_run=${MIN_RUN_S:-3}
min_run_requests=${MIN_RUN_REQUESTS:-30}
drain=${DRAIN_S:-5}
ttft_ms=${TTFT_MS:-500}
itl_ms=${ITL_MS:-100}
model_args=${MODEL_ARGS:---preset tiny}
mkdir -p "$out"
bench=$build/bench/loadgen/convoy-bench
convoyd=$build/src/daemon/convoyd
workload=bench/workloads/mixed.pbtxt
base=configs/mixed.pbtxt
# shellcheck disable=SC2054  # the commas separate one knob's values
space=(--set max_batch_size=2,4,8,32 --set max_queue_delay_microseconds=0,5000,20000
  --set max_num_batched_tokens=256,2048)
slo=(--ttft-ms "$ttft_ms" --itl-ms "$itl_ms")

model=${MODEL:-$out/model}
if [ -z "${MODEL:-}" ]; then
  # shellcheck disable=SC2086
  "$build/src/tools/convoy-mkmodel" $model_args --seed 1 --out "$model" >"$out/model.txt"
else
  echo "$MODEL" >"$out/model.txt"
fi

echo "sweep at $rate req/s, ${duration} s per point ..." >&2
start=$(date +%s.%N)
"$bench" sweep --convoyd "$convoyd" --model "$model" --base-config "$base" \
  --workload "$workload" --rate "$rate" --duration-s "$duration" --drain-s "$drain" "${slo[@]}" \
  "${space[@]}" --work-dir "$out/sweep" --json "$out/sweep.json" --markdown "$out/sweep.md" \
  --noprogress >"$out/sweep.txt" 2>"$out/sweep.err" || true
sweep_s=$(echo "$(date +%s.%N) - $start" | bc)
budget=${BUDGET_S:-$(echo "$sweep_s / 4" | bc)}

echo "tune within $budget s ..." >&2
cp "$base" "$out/live.pbtxt"
"$convoyd" --config "$out/live.pbtxt" --model "$model" --port 0 --port-file "$out/port" \
  --http-port 0 --http-port-file "$out/http-port" --metrics-port 0 >"$out/convoyd.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 600); do [ -s "$out/port" ] && [ -s "$out/http-port" ] && break; sleep 0.1; done
start=$(date +%s.%N)
"$bench" tune --addr "127.0.0.1:$(cat "$out/port")" --http-addr "127.0.0.1:$(cat "$out/http-port")" \
  --config "$out/live.pbtxt" --pid "$pid" --workload "$workload" --rate "$rate" \
  --ttft-p99 "$ttft_ms" --itl-p99 "$itl_ms" "${space[@]}" --budget-s "$budget" \
  --min-run-s "$min_run" --min-run-requests "$min_run_requests" --drain-s "$drain" --out "$out/tuned.pbtxt" --json "$out/tune.json" \
  --markdown "$out/tune.md" --svg "$out/tune.svg" --noprogress >"$out/tune.txt" 2>"$out/tune.err"
tune_s=$(echo "$(date +%s.%N) - $start" | bc)
kill "$pid"
wait "$pid" || true

# The sweep's best as --set flags; tune's best is its written config.
sweep_best=$(jq -r '.runs[.best].config' "$out/sweep.json")
tune_best=$(jq -r '.best' "$out/tune.json")
sets=()
for kv in $sweep_best; do sets+=(--set "$kv"); done

echo "three fresh runs of each best ..." >&2
fresh() {  # NAME BASE-CONFIG [--set ...]: goodput of three fresh runs, one per line
  local name=$1 config=$2
  shift 2
  for seed in 101 102 103; do
    "$bench" sweep --convoyd "$convoyd" --model "$model" --base-config "$config" \
      --workload "$workload" --rate "$rate" --duration-s "$duration" --drain-s "$drain" "${slo[@]}" \
      --seed "$seed" "$@" --work-dir "$out/fresh-$name-$seed" --json "$out/fresh-$name-$seed.json" \
      --noprogress >/dev/null 2>&1 || true
    jq -r '.runs[0].classes[-1].goodput_rps' "$out/fresh-$name-$seed.json"
  done
}
mapfile -t sweep_fresh < <(fresh sweep "$base" "${sets[@]}")
mapfile -t tune_fresh < <(fresh tune "$out/tuned.pbtxt")
mean() { printf '%s\n' "$@" | awk '{s += $1} END {printf "%.2f", s / NR}'; }
spread() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.2f-%.2f", lo, hi}'; }
sweep_mean=$(mean "${sweep_fresh[@]}")
tune_mean=$(mean "${tune_fresh[@]}")

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "### convoy-bench tune against an exhaustive sweep (CPU)"
echo
echo "Machine: $cpu, $(nproc) cores. Model: $(sed 's/^convoy-mkmodel: //' "$out/model.txt")."
echo "Workload: $workload, Poisson at $rate req/s; base config $base. Goodput: completed requests/s"
echo "with TTFT <= $ttft_ms ms and mean inter-token latency <= $itl_ms ms. Space: ${space[*]}."
echo
echo "| | points run | wall time | best point | goodput in 3 fresh runs (mean, range) |"
echo "|---|---|---|---|---|"
echo "| sweep | $(jq '.runs | length' "$out/sweep.json") | $(printf '%.0f' "$sweep_s") s | $sweep_best | $sweep_mean ($(spread "${sweep_fresh[@]}")) |"
echo "| tune | $(jq '.runs | length' "$out/tune.json") runs of $(jq '.candidates' "$out/tune.json") points | $(printf '%.0f' "$tune_s") s | $tune_best | $tune_mean ($(spread "${tune_fresh[@]}")) |"
echo
echo "Tune's best over the sweep's best, goodput: $(echo "scale=3; $tune_mean / $sweep_mean" | bc);"
echo "wall time, sweep over tune: $(echo "scale=2; $sweep_s / $tune_s" | bc). Outputs in $out."
