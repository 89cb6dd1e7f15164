#!/usr/bin/env bash
# convoy against llama.cpp on quantized GGUF files, each engine computing on the file's own blocks
# (convoy: executor.cpu_weights AUTO, which keeps a quantized file's blocks), the same machine, one
# run, interleaved: for docs/perf/cpu.md. Prints one Markdown table per file, with the ratios
# convoy / llama.cpp; raw JSON and logs go to OUT_DIR.
#
#   scripts/quant-compare.sh
#
# The files: the default model's Q4_1 (SmolLM2-135M) and two files of a 1.1B Llama (TinyLlama's
# shape with the Llama SentencePiece vocabulary llama.cpp keeps for its tests: random F16 weights
# written by scripts/lib/random_llama_gguf.py, quantized by llama.cpp's llama-quantize to Q4_K_M
# and Q8_0, or Q2_K, Q3_K_M and Q5_K_M when FILES asks), made once into LLAMACPP_DIR/models. Per file:
#   1. memory and load time: convoyd (its default config, the KV cache's budget set to the bytes
#      of llama-server's f16 cache for CTX tokens, and 16-bit) and llama-server (-c CTX, one
#      slot), each started ROUNDS times in turn with the file in the page cache: resident memory
#      (VmRSS) once it serves, and the time from process start to serving;
#   2. single stream, ROUNDS rounds, convoy (cpu_forward_bench) then llama.cpp (llama-bench), THREADS
#      threads on CPUS: decode at batch 1 after a 128-token prompt, prefill of 128 tokens, and the
#      streaming read bandwidth cpu_forward_bench measures beside its decode (the ratio
#      weights read per second / that bandwidth is `bw_fraction`, counting the packed bytes);
#   3. serving (unless USERS is empty): a closed loop of USERS users for DURATION_S on each engine
#      in turn (convoy-bench --protocol openai, workload WORKLOAD; convoyd with max_batch_size USERS,
#      llama-server with --parallel USERS --cont-batching and CTX tokens per slot), goodput under
#      the SLOs SLO_TTFT_MS and SLO_ITL_MS.
#
# Environment (all optional): BUILD_DIR (build: convoyd, convoy-bench and cpu_forward_bench must be
# built there), LLAMACPP_DIR (/var/tmp/convoy-llamacpp), FILES (any of "q4_1 q2_k q3_k_m q4_k_m
# q5_k_m q8_0"; default "q4_1 q4_k_m q8_0"), ROUNDS (3), CPUS (0), THREADS (1), SERVE_CPUS (0-1),
# SERVE_THREADS (2), CTX (2048), USERS (16), DURATION_S (30), WORKLOAD (bench/workloads/chat.pbtxt), SLO_TTFT_MS (2000),
# SLO_ITL_MS (200), OUT_DIR (a new /tmp/convoy-quant-compare-*). About 20 minutes for the three
# files once both engines are built (llama.cpp's first build: about 25 minutes on two cores).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
source scripts/lib/llamacpp.sh
source scripts/lib/serving.sh  # need_executables, stop_process, wait_ready
build=${BUILD_DIR:-build}
files=${FILES:-q4_1 q4_k_m q8_0}
rounds=${ROUNDS:-3}
cpus=${CPUS:-0}
threads=${THREADS:-1}
serve_cpus=${SERVE_CPUS:-0-1}
serve_threads=${SERVE_THREADS:-2}
ctx=${CTX:-2048}
users=${USERS-16}
duration=${DURATION_S:-30}
workload=${WORKLOAD:-bench/workloads/chat.pbtxt}
slo_ttft_ms=${SLO_TTFT_MS:-2000}
slo_itl_ms=${SLO_ITL_MS:-200}
out=${OUT_DIR:-$(mktemp -d /tmp/convoy-quant-compare-XXXXXX)}
mkdir -p "$out/logs" "$out/runs"
log() { echo "quant-compare: $*" >&2; }

convoyd=$build/src/daemon/convoyd
bench=$build/bench/loadgen/convoy-bench
forward_bench=$build/bench/cpu/cpu_forward_bench
need_executables "$build" "$convoyd" "$bench" "$forward_bench"
build_llamacpp quant-compare "$out/logs"

# --- the files -------------------------------------------------------------------------------
# A Python with gguf (for the random model's writer and the shapes below), pinned as the
# fixtures' own packages are.
venv=$repo/.cache/quant-compare-venv
if ! "$venv/bin/python" -c 'import gguf, numpy' 2>/dev/null; then
  log "making $venv (gguf and numpy, the versions in scripts/fixtures/requirements.txt)"
  python3 -m venv "$venv"
  mapfile -t pins < <(grep -E '^(gguf|numpy)==' scripts/fixtures/requirements.txt)
  "$venv/bin/pip" install --quiet "${pins[@]}"
fi
models=$llamacpp_dir/models
mkdir -p "$models"
declare -A gguf
for f in $files; do
  case $f in
    q4_1)
      scripts/fetch-default-model.sh >/dev/null
      gguf[q4_1]=$repo/models/SmolLM2-135M-Instruct.Q4_1.gguf
      ;;
    q2_k | q3_k_m | q4_k_m | q5_k_m | q8_0)
      gguf[$f]=$models/tinyllama-random.${f^^}.gguf
      if [ ! -s "${gguf[$f]}" ]; then
        f16=$models/tinyllama-random.F16.gguf
        if [ ! -s "$f16" ]; then
          vocab_dir=$(scripts/fetch-llamacpp-vocab.sh)
          log "writing $f16 (random weights, TinyLlama's shape, 2.2 GB)"
          "$venv/bin/python" scripts/lib/random_llama_gguf.py \
            --vocab "$vocab_dir/ggml-vocab-llama-spm.gguf" --out "$f16.tmp"
          mv "$f16.tmp" "$f16"
        fi
        log "writing ${gguf[$f]} with llama-quantize"
        "$llama_quantize" "$f16" "${gguf[$f]}.tmp" "${f^^}" >"$out/logs/quantize-$f.log" 2>&1
        mv "${gguf[$f]}.tmp" "${gguf[$f]}"
      fi
      ;;
    *)
      echo "quant-compare: unknown file '$f' in FILES (q4_1, q2_k, q3_k_m, q4_k_m, q5_k_m, q8_0)" >&2
      exit 2
      ;;
  esac
done

# llama.cpp's f16 KV cache for CTX tokens of a file, in bytes: layers x 2 x KV heads x head
# dimension x 2 bytes x tokens.
kv_bytes() {
  "$venv/bin/python" - "$1" "$ctx" <<'EOF'
import sys
import gguf
r = gguf.GGUFReader(sys.argv[1])
arch = r.fields["general.architecture"].contents()
get = lambda key: r.fields[f"{arch}.{key}"].contents()
heads = get("attention.head_count")
kv_heads = get("attention.head_count_kv") if f"{arch}.attention.head_count_kv" in r.fields else heads
head_dim = get("embedding_length") // heads
print(get("block_count") * 2 * kv_heads * head_dim * 2 * int(sys.argv[2]))
EOF
}

{
  echo "date=$(date -u +%Y-%m-%dT%H:%MZ)"
  echo "commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src bench || echo '+changes')"
  echo "cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)"
  echo "flags=$(grep -o -w -E 'avx2|avx512f|avx512_vnni|avx512_bf16|amx_int8' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo "llamacpp=llama-cpp-python $llamacpp_version (llama.cpp $llama_commit)"
  echo "rounds=$rounds threads=$threads cpus=$cpus serve_threads=$serve_threads serve_cpus=$serve_cpus"
  echo "ctx=$ctx users=$users duration=$duration slo_ttft_ms=$slo_ttft_ms slo_itl_ms=$slo_itl_ms"
  echo "load_before=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/machine.txt"

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
server_pid=""
stop_server() {
  [ -z "$server_pid" ] || stop_process "$server_pid"
  server_pid=""
}
trap stop_server EXIT
now_ms() { date +%s%3N; }
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# start_convoyd FILE SLOTS DIR: convoyd on FILE with configs/default.pbtxt's scheduler but SLOTS
# sequences, SERVE_THREADS threads, a 16-bit KV cache of llama-server's bytes; waits until it
# says SERVING. Sets server_pid, grpc_addr, http_addr, start_s (process start to SERVING).
start_convoyd() {
  local file=$1 slots=$2 dir=$3 kv t0
  kv=$(kv_bytes "$file")
  [ "$slots" -gt 1 ] && kv=$((kv * slots))
  mkdir -p "$dir"
  sed -e "s/^\( *max_batch_size:\).*/\1 $slots/" \
    -e "s/^\( *memory_budget_bytes:\).*/\1 $kv/" -e "s/^\( *\)# dtype: DTYPE_BF16/\1dtype: DTYPE_BF16/" \
    -e "s/^\( *cpu_threads:\).*/\1 $serve_threads/" configs/default.pbtxt >"$dir/config.pbtxt"
  rm -f "$dir/port" "$dir/http-port"
  t0=$(now_ms)
  taskset -c "$serve_cpus" "$convoyd" --config "$dir/config.pbtxt" --model "$file" \
    --listen-address 127.0.0.1 --port 0 --port-file "$dir/port" --http-listen-address 127.0.0.1 \
    --http-port 0 --http-port-file "$dir/http-port" --metrics-port 0 >"$dir/convoyd.log" 2>&1 &
  server_pid=$!
  wait_ready "$server_pid" convoyd "$dir/convoyd.log" grep -q "SERVING model" "$dir/convoyd.log"
  start_s=$(awk -v a="$t0" -v b="$(now_ms)" 'BEGIN { printf "%.2f", (b - a) / 1000 }')
  grpc_addr=127.0.0.1:$(cat "$dir/port")
  http_addr=127.0.0.1:$(cat "$dir/http-port")
}

# start_llama FILE SLOTS DIR: llama-server on FILE with SLOTS slots of CTX tokens each; waits
# until /health answers. Sets server_pid, http_addr, start_s.
start_llama() {
  local file=$1 slots=$2 dir=$3 port t0
  mkdir -p "$dir"
  port=$(free_port)
  t0=$(now_ms)
  taskset -c "$serve_cpus" "$llama_server" -m "$file" --host 127.0.0.1 --port "$port" \
    -t "$serve_threads" -tb "$serve_threads" --parallel "$slots" --cont-batching \
    -c $((slots * ctx)) --ignore-eos --no-ui >"$dir/llama-server.log" 2>&1 &
  server_pid=$!
  wait_ready "$server_pid" llama-server "$dir/llama-server.log" curl -sf -o /dev/null "http://127.0.0.1:$port/health"
  start_s=$(awk -v a="$t0" -v b="$(now_ms)" 'BEGIN { printf "%.2f", (b - a) / 1000 }')
  http_addr=127.0.0.1:$port
}

for f in $files; do
  file=${gguf[$f]}
  cat "$file" >/dev/null  # into the page cache: the load times below are not the disk's
  # --- 1. memory and load time -----------------------------------------------------------------
  for round in $(seq "$rounds"); do
    log "$f: memory and load, round $round/$rounds"
    start_convoyd "$file" 1 "$out/logs/$f-convoyd-r$round"
    sleep 2
    echo "rss_kib=$(rss_kib "$server_pid") start_s=$start_s" >"$out/runs/$f-mem-convoy-r$round.txt"
    stop_server
    start_llama "$file" 1 "$out/logs/$f-llama-r$round"
    sleep 2
    echo "rss_kib=$(rss_kib "$server_pid") start_s=$start_s" >"$out/runs/$f-mem-llama-r$round.txt"
    stop_server
  done
  # --- 2. single stream ------------------------------------------------------------------------
  for round in $(seq "$rounds"); do
    log "$f: single stream, round $round/$rounds: convoy"
    CONVOY_BENCH_MODEL=$file OMP_NUM_THREADS=$threads taskset -c "$cpus" "$forward_bench" \
      --benchmark_filter='BM_StreamingRead|BM_Prefill/native/128/|BM_Decode/native/1/' \
      --benchmark_format=json >"$out/runs/$f-convoy-r$round.json" 2>"$out/logs/$f-convoy-r$round.log"
    log "$f: single stream, round $round/$rounds: llama.cpp"
    taskset -c "$cpus" "$llama_bench" -m "$file" -t "$threads" -p 128 -n 0 -r 3 -o json \
      >"$out/runs/$f-llama-prefill-r$round.json" 2>"$out/logs/$f-llama-prefill-r$round.log"
    taskset -c "$cpus" "$llama_bench" -m "$file" -t "$threads" -p 0 -n 64 -d 128 -r 3 -o json \
      >"$out/runs/$f-llama-decode-r$round.json" 2>"$out/logs/$f-llama-decode-r$round.log"
  done
  # --- 3. serving ------------------------------------------------------------------------------
  if [ -n "$users" ]; then
    log "$f: serving, $users users, convoy"
    start_convoyd "$file" "$users" "$out/logs/$f-convoyd-serve"
    convoy_grpc=$grpc_addr
    "$bench" run --addr "$convoy_grpc" --http-addr "$http_addr" --protocol openai \
      --workload "$workload" --duration-s "$duration" --drain-s 60 --concurrency "$users" \
      --ttft-ms "$slo_ttft_ms" --itl-ms "$slo_itl_ms" --label convoy --noprogress --seed 7 \
      --json "$out/runs/$f-serve-convoy.json" >"$out/logs/$f-serve-convoy.txt" 2>&1
    # convoy-bench reads the model's description over convoy's gRPC API, which llama-server does
    # not have: the convoyd above stays up (idle) for it while llama-server is measured.
    convoy_pid=$server_pid
    server_pid=""
    start_llama "$file" "$users" "$out/logs/$f-llama-serve"
    "$bench" run --addr "$convoy_grpc" --http-addr "$http_addr" --protocol openai \
      --workload "$workload" --duration-s "$duration" --drain-s 60 --concurrency "$users" \
      --ttft-ms "$slo_ttft_ms" --itl-ms "$slo_itl_ms" --label llama.cpp --noprogress --seed 7 \
      --json "$out/runs/$f-serve-llama.json" >"$out/logs/$f-serve-llama.txt" 2>&1
    stop_server
    server_pid=$convoy_pid
    stop_server
  fi
done
trap - EXIT
echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"

# --- the tables ------------------------------------------------------------------------------
python3 - "$out" "$files" <<'EOF'
import glob
import json
import os
import statistics
import sys

out, files = sys.argv[1], sys.argv[2].split()
machine = {}
for line in open(f"{out}/machine.txt"):
    for part in ([line.strip()] if line.startswith(("cpu=", "flags=", "llamacpp=", "date="))
                 else line.split()):
        if "=" in part:
            key, value = part.split("=", 1)
            machine[key] = value


def kv_file(path):
    return dict(p.split("=", 1) for p in open(path).read().split())


def rounds(pattern):
    return sorted(glob.glob(f"{out}/runs/{pattern}"))


def convoy_bench(path, name):
    runs = [b for b in json.load(open(path))["benchmarks"]
            if b["name"].startswith(name) and b.get("run_type") != "aggregate"]
    return runs[0] if runs else None


def llama_ts(path):
    try:
        return json.load(open(path))[0]["avg_ts"]
    except (OSError, ValueError, IndexError, KeyError):
        return None


def fmt(values, digits=1):
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    return f"{statistics.median(values):.{digits}f} ({', '.join(f'{v:.{digits}f}' for v in values)})"


def ratio(a, b):
    pairs = [x / y for x, y in zip(a, b) if x is not None and y]
    if not pairs:
        return "–"
    return f"**{statistics.median(pairs):.2f}x** ({', '.join(f'{p:.2f}' for p in pairs)})"


print(f"{machine.get('date')}, commit {machine.get('commit')}; {machine.get('cpu')} ({machine.get('flags')}); "
      f"{machine.get('llamacpp')}; single stream: {machine['threads']} thread(s) on CPUs "
      f"{machine['cpus']}; servers: {machine['serve_threads']} threads on CPUs {machine['serve_cpus']}, "
      f"context {machine['ctx']}; load average {machine.get('load_before')} before, "
      f"{machine.get('load_after')} after. Each cell: the median (every round).\n")
for f in files:
    print(f"**{f.upper()}**\n")
    print("| | convoy | llama.cpp | convoy / llama.cpp |")
    print("|---|---|---|---|")
    mem = {e: [kv_file(p) for p in rounds(f"{f}-mem-{e}-r*.txt")] for e in ("convoy", "llama")}
    rss = {e: [int(m["rss_kib"]) / 1024 for m in mem[e]] for e in mem}
    start = {e: [float(m["start_s"]) for m in mem[e]] for e in mem}
    print(f"| resident memory once serving, MiB | {fmt(rss['convoy'], 0)} | {fmt(rss['llama'], 0)} | "
          f"{ratio(rss['convoy'], rss['llama'])} |")
    print(f"| process start to serving, s | {fmt(start['convoy'], 2)} | {fmt(start['llama'], 2)} | "
          f"{ratio(start['convoy'], start['llama'])} |")
    decode = [convoy_bench(p, "BM_Decode/native/1/") for p in rounds(f"{f}-convoy-r*.json")]
    prefill = [convoy_bench(p, "BM_Prefill/native/128/") for p in rounds(f"{f}-convoy-r*.json")]
    c_dec = [d["tokens/s"] if d else None for d in decode]
    c_pre = [p["tokens/s"] if p else None for p in prefill]
    l_dec = [llama_ts(p) for p in rounds(f"{f}-llama-decode-r*.json")]
    l_pre = [llama_ts(p) for p in rounds(f"{f}-llama-prefill-r*.json")]
    print(f"| decode, batch 1, context 128, tokens/s | {fmt(c_dec)} | {fmt(l_dec)} | {ratio(c_dec, l_dec)} |")
    print(f"| prefill of 128 tokens, tokens/s | {fmt(c_pre)} | {fmt(l_pre)} | {ratio(c_pre, l_pre)} |")
    bw = [d["bw_fraction"] if d else None for d in decode]
    wgb = [d["weights_GB/s"] if d else None for d in decode]
    sgb = [d["stream_GB/s"] if d else None for d in decode]
    print(f"| convoy's decode: packed weights read, GB/s; of the streaming read | {fmt(wgb, 2)}; "
          f"{fmt(bw, 2)} | | |")
    print(f"| streaming read beside it, GB/s | {fmt(sgb, 2)} | | |")
    serve = {}
    for e in ("convoy", "llama"):
        path = f"{out}/runs/{f}-serve-{e}.json"
        if os.path.exists(path):
            run = json.load(open(path))
            serve[e] = next((c for c in run.get("classes", []) if c["name"] == "all"), None)
    if serve:
        def cell(e, key, scale=1.0, digits=2):
            a = serve.get(e)
            return f"{a[key] * scale:.{digits}f}" if a else "failed"

        def sratio(key):
            a, b = serve.get("convoy"), serve.get("llama")
            return f"**{a[key] / b[key]:.2f}x**" if a and b and b[key] else "–"
        users = machine["users"]
        print(f"| {users} users: goodput, requests/s within the SLOs | {cell('convoy', 'goodput_rps')} | "
              f"{cell('llama', 'goodput_rps')} | {sratio('goodput_rps')} |")
        print(f"| {users} users: output tokens/s | {cell('convoy', 'output_tokens_per_s', digits=1)} | "
              f"{cell('llama', 'output_tokens_per_s', digits=1)} | {sratio('output_tokens_per_s')} |")
        for key, name in (("ttft_s", "TTFT"), ("itl_s", "inter-token latency")):
            for q in ("p50", "p99"):
                a, b = serve.get("convoy"), serve.get("llama")
                ca = f"{a[key][q] * 1e3:.0f}" if a else "failed"
                cb = f"{b[key][q] * 1e3:.0f}" if b else "failed"
                r = f"{a[key][q] / b[key][q]:.2f}x" if a and b and b[key][q] else "–"
                print(f"| {users} users: {name} {q}, ms | {ca} | {cb} | {r} |")
        print(f"| {users} users: completed / sent | "
              + " | ".join(f"{serve[e]['completed']}/{serve[e]['sent']}" if serve.get(e) else "failed"
                           for e in ("convoy", "llama")) + " | |")
    print()
print(f"SLOs: TTFT {machine['slo_ttft_ms']} ms, inter-token {machine['slo_itl_ms']} ms; "
      f"serving runs {machine['duration']} s each. Raw results: {out}")
EOF
