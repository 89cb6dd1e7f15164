#!/usr/bin/env bash
# Builds and runs the CPU forward-step benchmark on a TinyLlama-shaped random bf16 model (written
# once to build/bench-models, 2.2 GB) and prints a Markdown table of the figures and their ratios.
# Run it on an otherwise idle machine: background load moves every figure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh >/dev/null
out=$(mktemp)
CONVOY_BENCH_MODEL_DIR=${CONVOY_BENCH_MODEL_DIR:-build/bench-models} \
  build/bench/cpu/cpu_forward_bench --benchmark_format=json "$@" >"$out"
python3 - "$out" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["benchmarks"]
ctx = json.load(open(sys.argv[1]))["context"]
print(f"host: {ctx.get('host_name')}, {ctx.get('num_cpus')} CPUs, date {ctx.get('date')}\n")
stream = next((r["GB/s"] for r in runs if r["name"].startswith("BM_StreamingRead")), None)
if stream:
    print(f"streaming-read bandwidth (2 GiB, all threads): {stream:.1f} GB/s\n")
print("| benchmark | ms/step | tokens/s | other |")
print("| --- | ---: | ---: | --- |")
decode = {}
for r in runs:
    name = r["name"]
    if name.startswith("BM_StreamingRead"):
        continue
    parts = name.split("/")
    if name.startswith("BM_MatmulBF16"):
        print(f"| bf16 matmul {parts[1]} x 2048 -> 5632 | {r['real_time']:.1f} | | {r['TFLOP/s']:.2f} TFLOP/s (the ceiling) |")
        continue
    if "tokens/s" not in r:
        continue
    extra = []
    if "bw_fraction" in r:
        extra.append(f"weights read at {r['weights_GB/s']:.1f} GB/s = {100 * r['bw_fraction']:.0f}% of the {r['stream_GB/s']:.1f} GB/s streaming read")
        decode[(parts[1], int(parts[2]))] = r["tokens/s"]
    if "matmul_TFLOP/s" in r:
        extra.append(f"linear layers at {r['matmul_TFLOP/s']:.2f} TFLOP/s")
    print(f"| {parts[0][3:]} {parts[1]} {parts[2]} | {r['real_time']:.1f} | {r['tokens/s']:.1f} | {'; '.join(extra)} |")
for fmt in ("bf16", "f32"):
    if (fmt, 1) in decode:
        for b in (8, 16, 32):
            if (fmt, b) in decode:
                print(f"\n{fmt} decode batch {b} / batch 1 tokens/s: {decode[(fmt, b)] / decode[(fmt, 1)]:.1f}x", end="")
print()
PY
rm -f "$out"
