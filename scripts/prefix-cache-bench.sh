#!/usr/bin/env bash
# What the prefix cache buys, for docs/perf/cpu.md: the default model (SmolLM2-135M-Instruct),
# configs/default.pbtxt with kv_cache.enable_prefix_caching true and then false, the same
# requests at the same offered load (bench/workloads/shared_prefix.pbtxt: a 1,000-token prefix
# every prompt shares, then 16..64 tokens of its own, 16 tokens out, Poisson), through
# convoy-bench sweep (one convoyd per setting, on free loopback ports). Prints a Markdown table and
# the ratios: TTFT without the cache over TTFT with it, and the throughputs side by side (equal
# when both keep up with the offered load). Builds nothing.
#
#   scripts/prefix-cache-bench.sh BUILD_DIR
#
# BUILD_DIR must hold convoyd and convoy-bench. Environment (all optional): RATE (0.5 req/s),
# DURATION_S (60), OUT_DIR (a new /tmp/convoy-prefix-*: JSON, logs). Run it on an otherwise idle
# machine.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
rate=${RATE:-0.5}
duration=${DURATION_S:-60}
out=${OUT_DIR:-$(mktemp -d /tmp/convoy-prefix-XXXXXX)}
mkdir -p "$out"
bench=$build/bench/loadgen/convoy-bench
convoyd=$build/src/daemon/convoyd
# shellcheck source=scripts/lib/serving.sh
. scripts/lib/serving.sh
need_executables "$1" "$bench" "$convoyd"
model=$(scripts/fetch-default-model.sh)

echo "prefix cache on, then off: $rate req/s for ${duration} s each ..." >&2
"$bench" sweep --convoyd "$convoyd" --model "$model" --base-config configs/default.pbtxt \
  --workload bench/workloads/shared_prefix.pbtxt --rate "$rate" --duration-s "$duration" \
  --drain-s 60 --set kv_cache.enable_prefix_caching=true,false --work-dir "$out/sweep" \
  --json "$out/sweep.json" >"$out/sweep.txt"

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
python3 - "$out/sweep.json" "$rate" "$duration" "$cpu" "$(nproc)" "$out" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
by = {r["config"]: r for r in runs}
on = by.get("kv_cache.enable_prefix_caching=true")
off = by.get("kv_cache.enable_prefix_caching=false")
print(f"### Prefix cache: 1,000-token shared prefix (default model, CPU)")
print()
print(f"Machine: {sys.argv[4]}, {sys.argv[5]} cores. Model: SmolLM2-135M-Instruct (Q4_1 GGUF, "
      "bf16 products). Workload: bench/workloads/shared_prefix.pbtxt (1,000 shared tokens + "
      f"16..64 own, 16 out), Poisson at {sys.argv[2]} req/s for {sys.argv[3]} s per setting, the "
      "same requests. Config: configs/default.pbtxt. Command: scripts/prefix-cache-bench.sh "
      f"(convoy-bench sweep; JSON in {sys.argv[6]}).")
print()
if not on or not off or "error" in on or "error" in off:
    print("a run failed:", (on or {}).get("error"), (off or {}).get("error"))
    sys.exit(1)
a, b = on["classes"][-1], off["classes"][-1]
def ms(x, key, p):
    return x[key].get(p, float("nan")) * 1e3
print("| prefix cache | completed | failed | req/s | output tok/s | TTFT p50 ms | TTFT p99 ms | "
      "ITL p50 ms | E2E p50 ms |")
print("|---|---|---|---|---|---|---|---|---|")
for name, x in (("on", a), ("off", b)):
    print(f"| {name} | {x['completed']} | {x['failed']} | {x['requests_per_s']:.3f} | "
          f"{x['output_tokens_per_s']:.2f} | {ms(x, 'ttft_s', 'p50'):.1f} | "
          f"{ms(x, 'ttft_s', 'p99'):.1f} | {ms(x, 'itl_s', 'p50'):.2f} | "
          f"{ms(x, 'e2e_s', 'p50'):.1f} |")
def ratio(p, q):
    return p / q if q else float("inf")
print()
print("| ratio | value | target |")
print("|---|---|---|")
print(f"| p50 TTFT, off / on | {ratio(ms(b, 'ttft_s', 'p50'), ms(a, 'ttft_s', 'p50')):.2f}x lower with the cache | >= 5x |")
print(f"| p99 TTFT, off / on | {ratio(ms(b, 'ttft_s', 'p99'), ms(a, 'ttft_s', 'p99')):.2f}x lower with the cache | |")
print(f"| throughput, completed req/s, on / off | {ratio(a['requests_per_s'], b['requests_per_s']):.2f}x | equal |")
PY
