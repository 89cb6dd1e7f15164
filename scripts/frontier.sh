#!/usr/bin/env bash
# The goodput frontier of convoy on this machine's CPU, for docs/perf/cpu.md: builds convoyd,
# convoy-mkmodel and convoy-bench, writes a small random Llama model, then
#   1. sweeps server configs (batching mode x max_batch_size x prefill_chunk_size, on
#      configs/mixed.pbtxt) with the mixed workload at one offered load and prints the frontier;
#   2. runs continuous against static batching at the same offered load (open loop, same rate,
#      same requests) and prints the throughput and p50/p99 TTFT ratios.
# Everything printed on stdout is Markdown; progress and daemon messages go to stderr. Takes about
# ten minutes on two cores. Run it on an otherwise idle machine: background load moves every figure.
#
# Environment (all optional): BUILD_DIR (default build-frontier), JOBS (2), OUT_DIR (a new
# /tmp/convoy-frontier-*: JSON, CSV, SVG, logs), DURATION_S (20 s of sending per run), SWEEP_RATE
# (8 req/s), COMPARE_RATE (12 req/s), TTFT_MS (500) and ITL_MS (100) for goodput, MODEL_ARGS
# (convoy-mkmodel flags; default the tiny preset).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${BUILD_DIR:-$root/build-frontier}
jobs=${JOBS:-2}
out=${OUT_DIR:-$(mktemp -d /tmp/convoy-frontier-XXXXXX)}
duration=${DURATION_S:-20}
sweep_rate=${SWEEP_RATE:-8}
compare_rate=${COMPARE_RATE:-12}
ttft_ms=${TTFT_MS:-500}
itl_ms=${ITL_MS:-100}
model_args=${MODEL_ARGS:---preset tiny}
mkdir -p "$out"

echo "building in $build ..." >&2
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCONVOY_ENABLE_CUDA=OFF \
  >"$out/cmake.log"
cmake --build "$build" -j"$jobs" --target convoyd convoy-mkmodel convoy-bench >"$out/build.log"
bench=$build/bench/loadgen/convoy-bench
convoyd=$build/src/daemon/convoyd

# shellcheck disable=SC2086
"$build/src/tools/convoy-mkmodel" $model_args --seed 1 --out "$out/model" >"$out/model.txt"

common=(--convoyd "$convoyd" --model "$out/model" --base-config configs/mixed.pbtxt
  --workload bench/workloads/mixed.pbtxt --duration-s "$duration" --drain-s 15
  --ttft-ms "$ttft_ms" --itl-ms "$itl_ms")

echo "sweep: 8 configs at $sweep_rate req/s, ${duration}s each ..." >&2
"$bench" sweep "${common[@]}" --rate "$sweep_rate" \
  --set mode=CONTINUOUS,STATIC --set max_batch_size=8,32 --set prefill_chunk_size=128,512 \
  --work-dir "$out/sweep" --json "$out/sweep.json" --csv "$out/sweep.csv" \
  --svg "$out/sweep.svg" --markdown "$out/sweep.md" >"$out/sweep.txt" || true

echo "continuous vs static at $compare_rate req/s ..." >&2
"$bench" sweep "${common[@]}" --rate "$compare_rate" --set mode=CONTINUOUS,STATIC \
  --work-dir "$out/compare" --json "$out/compare.json" --csv "$out/compare.csv" \
  --svg "$out/compare.svg" --markdown "$out/compare.md" >"$out/compare.txt" || true

nproc_=$(nproc)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "### Goodput frontier, mixed workload (CPU)"
echo
echo "Machine: $cpu, $nproc_ cores. Model: random Llama, $(sed 's/^convoy-mkmodel: //' "$out/model.txt")."
echo "Workload: bench/workloads/mixed.pbtxt (chat 60%, RAG 15%, background 25%), Poisson at"
echo "$sweep_rate req/s for ${duration} s per config; base config configs/mixed.pbtxt. Goodput: completed"
echo "requests per second with TTFT <= ${ttft_ms} ms and mean inter-token latency <= ${itl_ms} ms."
echo "Command: scripts/frontier.sh (convoy-bench sweep; JSON, CSV and SVG in $out)."
echo
cat "$out/sweep.md"
echo
python3 - "$out/compare.json" "$compare_rate" "$duration" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
by = {r["config"]: r for r in runs}
c, s = by.get("mode=CONTINUOUS"), by.get("mode=STATIC")
print(f"### Continuous vs static batching at the same offered load ({sys.argv[2]} req/s, "
      f"Poisson, {sys.argv[3]} s, same requests)")
print()
if not c or not s or "error" in c or "error" in s:
    print("a run failed:", (c or {}).get("error"), (s or {}).get("error"))
    sys.exit(0)
a, b = c["classes"][-1], s["classes"][-1]
def ms(x, k):
    return x["ttft_s"].get(k, float("nan")) * 1e3
print("| batching | completed | failed | req/s | output tok/s | TTFT p50 ms | TTFT p99 ms | "
      "ITL p50 ms | ITL p99 ms | E2E p50 ms |")
print("|---|---|---|---|---|---|---|---|---|---|")
for name, x in (("continuous", a), ("static", b)):
    print(f"| {name} | {x['completed']} | {x['failed']} | {x['requests_per_s']:.2f} | "
          f"{x['output_tokens_per_s']:.1f} | {ms(x, 'p50'):.1f} | {ms(x, 'p99'):.1f} | "
          f"{x['itl_s'].get('p50', 0) * 1e3:.2f} | {x['itl_s'].get('p99', 0) * 1e3:.1f} | "
          f"{x['e2e_s'].get('p50', 0) * 1e3:.1f} |")
def ratio(p, q):
    return p / q if q else float("inf")
print()
print("| ratio (continuous / static) | value | target |")
print("|---|---|---|")
print(f"| throughput, output tokens/s | {ratio(a['output_tokens_per_s'], b['output_tokens_per_s']):.2f}x | >= 5x |")
print(f"| throughput, completed req/s | {ratio(a['requests_per_s'], b['requests_per_s']):.2f}x | |")
print(f"| p50 TTFT, static / continuous | {ratio(ms(b, 'p50'), ms(a, 'p50')):.2f}x lower | >= 5x |")
print(f"| p99 TTFT, static / continuous | {ratio(ms(b, 'p99'), ms(a, 'p99')):.2f}x lower | |")
PY
echo
echo "Plot: $out/sweep.svg (TTFT and inter-token latency p50/p99 against output tokens/s per config)."
