#!/usr/bin/env bash
# convoy against llama.cpp on the same GGUF model, the same machine and the same workload, for
# docs/perf/cpu.md section 6. Prints one Markdown table with both engines side by side and the
# ratios convoy / llama.cpp; raw JSON and logs go to OUT_DIR.
#
#   scripts/llamacpp-compare.sh
#
# What it does:
#   1. builds convoyd, convoy-bench and cpu_forward_bench in build-compare/ (or uses BUILD_DIR as
#      it is, building nothing there);
#   2. downloads the PyPI sdist of llama-cpp-python (pinned in scripts/lib/llamacpp.sh), unpacks it into LLAMACPP_DIR
#      (outside the repository) and builds llama-server, llama-bench and llama-quantize from its
#      vendored llama.cpp (CPU only, -march=native, no CURL); cached, rebuilt only when missing;
#   3. fetches the default model (scripts/fetch-default-model.sh) and writes a BF16 and an F16
#      copy of it with llama-quantize (into LLAMACPP_DIR/models), so that both engines can be
#      compared at one weight precision: convoyd dequantizes a GGUF file at load, here into bf16
#      (executor.cpu_weights: WEIGHTS_BF16), while llama.cpp computes on the file's own type;
#   4. single stream, ROUNDS times, convoy and llama.cpp in turn: prefill tokens/s of one 128- and
#      one 512-token prompt and decode tokens/s at a context of 128 (convoy: cpu_forward_bench on
#      the Q4_1 file dequantized to bf16; llama.cpp: llama-bench on the BF16, F16 and Q4_1 files);
#   5. serving through the OpenAI API (streamed /v1/completions, convoy-bench --protocol openai,
#      workload WORKLOAD) against convoyd and llama-server (--parallel USERS --cont-batching, one
#      server per weight type in LLAMA_SERVE_TYPES), every load point run on each engine in turn:
#      closed loops of the concurrencies in CLOSED, then open (Poisson) loops at the rates in
#      RATES; then closed loops of BIG_USERS with servers restarted for that many slots.
# Every server and benchmark is pinned to the CPUs in CPUS with THREADS threads; interleaving
# the engines means that whatever else loads the machine hits both.
#
# convoy-bench reads the model's description (name, vocabulary, context) over convoy's gRPC API,
# which llama-server does not have: its runs against llama-server take --addr from the convoyd
# that is up at the same time (idle then) and send the requests to llama-server's HTTP port. The
# prompts are token ids, and neither server stops at the end-of-sequence token (convoyd stops a
# prompt of ids only where the request says; llama-server runs with --ignore-eos), so both
# generate exactly max_tokens per request.
#
# Environment (all optional): BUILD_DIR, LLAMACPP_DIR (/var/tmp/convoy-llamacpp), MODEL
# (models/SmolLM2-135M-Instruct.Q4_1.gguf; another GGUF file runs as it is where the table says
# Q4_1), CPUS (0-1), THREADS (2), ROUNDS (3), WORKLOAD
# (bench/workloads/chat.pbtxt), USERS (16: convoy's max_batch_size and llama-server's --parallel),
# CLOSED ("1 16"), RATES ("2 4 6 8"), BIG_USERS (64; each empty: none), DURATION_S (20 per run),
# DRAIN_S (30), SLO_TTFT_MS (2000), SLO_ITL_MS (200), LLAMA_SERVE_TYPES (the llama-server runs'
# weights, any of "bf16 f16 q4_1"; default "bf16 q4_1"), CTX_PER_SLOT (1024 tokens of llama-server
# context per slot), LLAMA_ENV (variables for llama.cpp's processes, e.g.
# OMP_WAIT_POLICY=passive; default none), QUIET_WAIT_S, QUIET_MAX, RETRIES, RETRY_ABOVE (how
# disturbed measurements are avoided, below), OUT_DIR (a new /tmp/convoy-llamacpp-compare-*).
# Markdown on stdout, progress on stderr. About 15 minutes here once everything is built (the
# first run builds both engines: about 25 minutes more on two cores).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

source scripts/lib/llamacpp.sh  # llamacpp_version, llamacpp_dir (LLAMACPP_DIR), the sdist
source scripts/lib/serving.sh   # stop_process, wait_ready
model=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
cpus=${CPUS:-0-1}
threads=${THREADS:-2}
rounds=${ROUNDS:-3}
workload=${WORKLOAD:-bench/workloads/chat.pbtxt}
users=${USERS:-16}
closed=${CLOSED-1 16}
rates=${RATES-2 4 6 8}
big_users=${BIG_USERS-64}
duration=${DURATION_S:-20}
drain=${DRAIN_S:-30}
slo_ttft_ms=${SLO_TTFT_MS:-2000}
slo_itl_ms=${SLO_ITL_MS:-200}
serve_types=${LLAMA_SERVE_TYPES:-bf16 q4_1}
ctx_per_slot=${CTX_PER_SLOT:-1024}
out=${OUT_DIR:-$(mktemp -d /tmp/convoy-llamacpp-compare-XXXXXX)}
mkdir -p "$out"/single "$out"/serve "$out"/logs

log() { echo "llamacpp-compare: $*" >&2; }
pin() { taskset -c "$cpus" "$@"; }
# llama.cpp's processes, with LLAMA_ENV's variables (e.g. OMP_WAIT_POLICY=passive) when given.
llama_env=${LLAMA_ENV:-}
pin_llama() {
  # shellcheck disable=SC2086
  env $llama_env taskset -c "$cpus" "$@"
}

# --- 1. convoy -------------------------------------------------------------------------------
if [ -n "${BUILD_DIR:-}" ]; then
  build=$(cd "$BUILD_DIR" && pwd)
else
  scripts/setup.sh
  build=$repo/build-compare
  if [ ! -f "$build/build.ninja" ]; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCONVOY_BUILD_TESTS=OFF \
      -DCONVOY_ENABLE_CUDA=OFF >"$out/logs/convoy-cmake.log"
  fi
  log "building convoyd, convoy-bench and cpu_forward_bench in build-compare/"
  cmake --build "$build" -j "$(nproc)" --target convoyd convoy-bench cpu_forward_bench \
    >"$out/logs/convoy-build.log"
fi
convoyd=$build/src/daemon/convoyd
bench=$build/bench/loadgen/convoy-bench
forward_bench=$build/bench/cpu/cpu_forward_bench
for exe in "$convoyd" "$bench" "$forward_bench"; do
  if [ ! -x "$exe" ]; then
    echo "llamacpp-compare: $exe is missing (build convoyd, convoy-bench, cpu_forward_bench)" >&2
    exit 2
  fi
done

# --- 2. llama.cpp ----------------------------------------------------------------------------
build_llamacpp llamacpp-compare "$out/logs"

# --- 3. the model, and copies at 16 bits -----------------------------------------------------
if [ "$model" = models/SmolLM2-135M-Instruct.Q4_1.gguf ]; then
  scripts/fetch-default-model.sh >/dev/null
fi
model=$(cd "$(dirname "$model")" && pwd)/$(basename "$model")
stem=$(basename "$model" .gguf)
stem=${stem%.Q4_1}
declare -A gguf
gguf[q4_1]=$model
mkdir -p "$llamacpp_dir/models"
for t in bf16 f16; do
  upper=${t^^}
  gguf[$t]=$llamacpp_dir/models/$stem.$upper.gguf
  if [ ! -s "${gguf[$t]}" ]; then
    log "writing ${gguf[$t]} with llama-quantize"
    "$llama_quantize" --allow-requantize "$model" "${gguf[$t]}.tmp" "$upper" \
      >"$out/logs/quantize-$t.log" 2>&1
    mv "${gguf[$t]}.tmp" "${gguf[$t]}"
  fi
done

# --- the machine -----------------------------------------------------------------------------
{
  echo "cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)"
  echo "cores=$(nproc)"
  echo "flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' |
    grep -E '^(avx2|avx512f|avx512_bf16|avx512_vnni|avx512_fp16|amx_bf16|amx_int8|amx_tile)$' |
    tr '\n' ' ')"
  echo "mem=$(free -g | awk '/^Mem:/ { print $2 " GiB" }')"
  echo "load_before=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "llamacpp_version=$llamacpp_version"
  echo "llamacpp_commit=$llama_commit"
  echo "convoy_commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "date=$(date -u +%Y-%m-%dT%H:%MZ)"
  echo "cpus=$cpus"
  echo "threads=$threads"
  echo "rounds=$rounds"
  echo "workload=$workload"
  echo "users=$users"
  echo "closed=$closed"
  echo "rates=$rates"
  echo "big_users=$big_users"
  echo "duration_s=$duration"
  echo "drain_s=$drain"
  echo "slo_ttft_ms=$slo_ttft_ms"
  echo "slo_itl_ms=$slo_itl_ms"
  echo "serve_types=$serve_types"
  echo "llama_env=$llama_env"
} >"$out/machine.txt"

# --- what else runs --------------------------------------------------------------------------
# The machine may be shared. For every measurement the CPU time that processes other than ours
# took is recorded (the whole machine's busy time from /proc/stat, less the measured command's and
# our servers' own), so that a disturbed run can be told from a slow engine; llama.cpp's threads
# wait for each other at every operation, so a core taken by someone else slows it far more than
# its share. A measurement first waits, up to QUIET_WAIT_S seconds (20), until the others take
# less than QUIET_MAX of all CPUs (0.2) over a 2-second sample; one during which they took more
# than RETRY_ABOVE (0.1) is run again, up to RETRIES more times (2), and the least disturbed
# attempt is kept (the others are moved to a disturbed/ folder beside it).
declare -A pid http
ticks=$(getconf CLK_TCK)
ncpu=$(nproc)
quiet_wait=${QUIET_WAIT_S:-20}
quiet_max=${QUIET_MAX:-0.2}
retries=${RETRIES:-2}
retry_above=${RETRY_ABOVE:-0.1}
printf 'quiet_wait_s=%s\nquiet_max=%s\nretries=%s\nretry_above=%s\n' "$quiet_wait" "$quiet_max" \
  "$retries" "$retry_above" >>"$out/machine.txt"
busy_seconds() {  # CPU seconds the whole machine has been busy (user, nice, system, irq, steal)
  awk -v t="$ticks" '/^cpu / { printf "%.2f", ($2 + $3 + $4 + $7 + $8 + $9) / t }' /proc/stat
}
cpu_seconds() {  # user + system CPU seconds of one process (all its threads)
  awk -v t="$ticks" '{ printf "%.2f", ($14 + $15) / t }' "/proc/$1/stat" 2>/dev/null || echo 0
}
servers_seconds() {  # the same, summed over our running servers
  local name total=0
  for name in "${!pid[@]}"; do
    total=$(awk -v a="$total" -v b="$(cpu_seconds "${pid[$name]}")" 'BEGIN { print a + b }')
  done
  echo "$total"
}
servers_each() {  # NAME=SECONDS for each running server
  local name
  for name in "${!pid[@]}"; do echo -n "$name=$(cpu_seconds "${pid[$name]}") "; done
}
others_share() {  # the fraction of all CPUs others used over $1 seconds
  local b0 s0
  b0=$(busy_seconds)
  s0=$(servers_seconds)
  sleep "$1"
  awk -v b="$(awk -v a="$(busy_seconds)" -v b="$b0" 'BEGIN { print a - b }')" \
    -v s="$(awk -v a="$(servers_seconds)" -v b="$s0" 'BEGIN { print a - b }')" \
    -v w="$1" -v n="$ncpu" 'BEGIN { x = (b - s) / (w * n); printf "%.3f", x < 0 ? 0 : x }'
}
wait_quiet() {  # prints the seconds waited
  local waited=0
  while [ "$waited" -lt "$quiet_wait" ] &&
    awk -v x="$(others_share 2)" -v m="$quiet_max" 'BEGIN { exit !(x >= m) }'; do
    waited=$((waited + 2))
  done
  echo "$waited"
}
# measured_once PREFIX COMMAND...: runs COMMAND with its stdout in PREFIX.out and its stderr in
# PREFIX.log, and writes PREFIX.noise: wall seconds, the command's own CPU seconds, our servers'
# (together, and each before and after), the others', and the others' share of all CPUs.
TIMEFORMAT='%3R %3U %3S'
measured_once() {
  local prefix=$1 waited b0 s0 b1 s1 e0 e1 wall user sys rc=0
  shift
  waited=$(wait_quiet)
  e0=$(servers_each)
  b0=$(busy_seconds)
  s0=$(servers_seconds)
  { time "$@" >"$prefix.out" 2>"$prefix.log"; } 2>"$prefix.time" || rc=$?
  b1=$(busy_seconds)
  s1=$(servers_seconds)
  e1=$(servers_each)
  read -r wall user sys <"$prefix.time"
  awk -v w="$wall" -v u="$user" -v y="$sys" -v b0="$b0" -v b1="$b1" -v s0="$s0" -v s1="$s1" \
    -v n="$ncpu" -v q="$waited" -v e0="$e0" -v e1="$e1" -v rc="$rc" 'BEGIN {
      own = u + y; servers = s1 - s0; others = (b1 - b0) - own - servers
      if (others < 0) others = 0
      printf "wall_s=%.2f\nown_cpu_s=%.2f\nservers_cpu_s=%.2f\nothers_cpu_s=%.2f\n", w, own, servers, others
      printf "others_share=%.3f\nquiet_waited_s=%d\nexit_code=%d\n", others / (w * n), q, rc
      printf "servers_before=%s\nservers_after=%s\n", e0, e1
    }' >"$prefix.noise"
  return "$rc"
}
share_of() { sed -n 's/^others_share=//p' "$1.noise"; }
# measured PREFIX COMMAND...: measured_once, again while the others took more than RETRY_ABOVE;
# PREFIX.* is the least disturbed attempt, the rest are in disturbed/PREFIX.aN.*. Every file the
# command writes must be named PREFIX.something.
measured() {
  local prefix=$1 dir base attempt=0 best="" best_share f
  shift
  dir=$(dirname "$prefix")/disturbed
  base=$(basename "$prefix")
  while :; do
    attempt=$((attempt + 1))
    measured_once "$prefix" "$@" || log "exit code $? from: $* (see $prefix.log)"
    if awk -v x="$(share_of "$prefix")" -v m="$retry_above" 'BEGIN { exit !(x <= m) }'; then
      break
    fi
    mkdir -p "$dir"
    for f in "$prefix".*; do mv "$f" "$dir/$base.a$attempt.${f##*/"$base".}"; done
    if [ -z "$best" ] || awk -v x="$(share_of "$dir/$base.a$attempt")" -v b="$best_share" \
      'BEGIN { exit !(x < b) }'; then
      best=$attempt
      best_share=$(share_of "$dir/$base.a$attempt")
    fi
    if [ "$attempt" -gt "$retries" ]; then
      log "$base: others took ${best_share} of the CPUs in the least disturbed of $attempt attempts"
      for f in "$dir/$base.a$best".*; do mv "$f" "$prefix.${f##*/"$base".a"$best".}"; done
      break
    fi
    log "$base: others took $(share_of "$dir/$base.a$attempt") of the CPUs; again"
  done
}

# --- 4. single stream ------------------------------------------------------------------------
for round in $(seq "$rounds"); do
  log "single stream, round $round/$rounds: convoy (cpu_forward_bench, bf16 weights)"
  CONVOY_BENCH_MODEL=$model OMP_NUM_THREADS=$threads measured "$out/single/convoy-r$round" \
    pin "$forward_bench" --benchmark_filter='BM_Prefill/bf16/(128|512)/|BM_Decode/bf16/1/' \
    --benchmark_format=json
  for t in bf16 f16 q4_1; do
    log "single stream, round $round/$rounds: llama.cpp $t (llama-bench)"
    measured "$out/single/llama-$t-prefill-r$round" \
      pin_llama "$llama_bench" -m "${gguf[$t]}" -t "$threads" -p 128,512 -n 0 -r 3 -o json
    measured "$out/single/llama-$t-decode-r$round" \
      pin_llama "$llama_bench" -m "${gguf[$t]}" -t "$threads" -p 0 -n 64 -d 128 -r 3 -o json
  done
done

# --- 5. serving ------------------------------------------------------------------------------
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
convoy_grpc=""
stop_servers() {
  local name
  for name in "${!pid[@]}"; do
    stop_process "${pid[$name]}"
    unset "pid[$name]"
  done
}
trap stop_servers EXIT

# convoyd with max_batch_size $1; its other scheduler fields are configs/default.pbtxt's values,
# the KV cache twice its 1 GiB (room for 64 sequences).
start_convoy() {
  local slots=$1 dir=$out/logs/convoyd-$1
  mkdir -p "$dir"
  cat >"$dir/config.pbtxt" <<EOF
# convoyd for scripts/llamacpp-compare.sh: configs/default.pbtxt's scheduler with $slots sequences
# at most, bf16 weights, $threads threads.
scheduler {
  mode: CONTINUOUS
  max_batch_size: $slots
  max_queue_delay_microseconds: 0
  max_num_batched_tokens: 2048
  prefill_chunk_size: 512
  length_grouping_window: 16
  priority_levels: 1
  max_queue_size: 4096
}
kv_cache { block_size: 16 memory_budget_bytes: 2147483648 enable_prefix_caching: true }
executor { device: CPU cpu_threads: $threads skip_padding: true cpu_weights: WEIGHTS_BF16 }
EOF
  rm -f "$dir/port" "$dir/http-port"
  # Started directly (no shell function in between), so that $! is the server's own process id.
  taskset -c "$cpus" "$convoyd" --config "$dir/config.pbtxt" --model "$model" \
    --listen-address 127.0.0.1 --port 0 --port-file "$dir/port" --http-listen-address 127.0.0.1 --http-port 0 \
    --http-port-file "$dir/http-port" --metrics-port 0 >"$dir/convoyd.log" 2>&1 &
  pid[convoy]=$!
  wait_ready "${pid[convoy]}" convoyd "$dir/convoyd.log" test -s "$dir/port" -a -s "$dir/http-port"
  convoy_grpc=127.0.0.1:$(cat "$dir/port")
  http[convoy]=127.0.0.1:$(cat "$dir/http-port")
}

# llama-server on the weights of type $1 with $2 slots.
start_llama() {
  local t=$1 slots=$2 port name=llama-$1 log=$out/logs/llama-server-$1-$2.log
  port=$(free_port)
  # shellcheck disable=SC2086
  env $llama_env taskset -c "$cpus" "$llama_server" -m "${gguf[$t]}" --host 127.0.0.1 \
    --port "$port" -t "$threads" -tb "$threads" --parallel "$slots" --cont-batching \
    -c $((slots * ctx_per_slot)) --ignore-eos --no-ui >"$log" 2>&1 &
  pid[$name]=$!
  http[$name]=127.0.0.1:$port
  wait_ready "${pid[$name]}" llama-server "$log" curl -sf -o /dev/null "http://127.0.0.1:$port/health"
}

engines=(convoy)
for t in $serve_types; do engines+=("llama-$t"); done

# One load point ($1: c<N> for a closed loop of N, r<R> for R requests/s) on every engine in turn.
# Each point draws its own prompts (--seed), the same for every engine: with one seed for all, a
# point would find the prompts of the points before it in convoyd's prefix cache.
point_seed=100
run_point() {
  local point=$1 load engine file
  point_seed=$((point_seed + 1))
  case $point in
    c*) load=(--concurrency "${point#c}") ;;
    r*) load=(--rate "${point#r}") ;;
  esac
  for engine in "${engines[@]}"; do
    log "serving: $point on $engine (${duration} s)"
    file=$out/serve/$point-$engine
    measured "$file" "$bench" run --addr "$convoy_grpc" --http-addr "${http[$engine]}" \
      --protocol openai --workload "$workload" --duration-s "$duration" --drain-s "$drain" "${load[@]}" \
      --ttft-ms "$slo_ttft_ms" --itl-ms "$slo_itl_ms" --label "$engine" --noprogress \
      --seed "$point_seed" --json "$file.json"
  done
}

log "serving with $users slots: starting convoyd and llama-server (${serve_types})"
start_convoy "$users"
for t in $serve_types; do start_llama "$t" "$users"; done
for c in $closed; do run_point "c$c"; done
for r in $rates; do run_point "r$r"; done
stop_servers
if [ -n "$big_users" ]; then
  log "serving with $big_users slots: restarting the servers"
  start_convoy "$big_users"
  for t in $serve_types; do start_llama "$t" "$big_users"; done
  run_point "c$big_users"
  stop_servers
fi
trap - EXIT
echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"

# --- the table -------------------------------------------------------------------------------
python3 - "$out" <<'EOF'
import glob
import json
import os
import re
import statistics
import sys

out = sys.argv[1]
machine = dict(line.rstrip("\n").split("=", 1) for line in open(f"{out}/machine.txt") if "=" in line)
serve_types = machine["serve_types"].split()
ratio_types = ["bf16", "q4_1"]  # the table's llama.cpp columns (F16 is in a line below it)
label = {"bf16": "BF16", "f16": "F16", "q4_1": "Q4_1"}


def median(values):
    return statistics.median(values) if values else float("nan")


def rounds(pattern):
    return sorted(glob.glob(f"{out}/single/{pattern}"))


def noise(path):
    try:
        return dict(line.strip().split("=", 1) for line in open(path) if "=" in line)
    except OSError:
        return None


def share(path):
    n = noise(path)
    return float(n["others_share"]) if n else None


# Single stream: per measurement and engine, {round: (tokens/s, the others' CPU share)}.
single = {}
# Prefill: per measurement, {round: (the machine's multiply-add peak in FLOP/s, product FLOP per
# token)} from convoy's run of that round.
peaks = {}
retry_above = float(machine["retry_above"])


def round_of(path):
    return int(re.search(r"-r(\d+)\.out$", path).group(1))


for path in rounds("convoy-r*.out"):
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type", "iteration") != "iteration" or "tokens/s" not in b:
            continue
        m = re.match(r"BM_(Prefill|Decode)/bf16/(\d+)/", b["name"])
        if not m:
            continue
        key = {("Prefill", "128"): "prefill128", ("Prefill", "512"): "prefill512",
               ("Decode", "1"): "decode"}.get(m.groups())
        if key:
            single.setdefault((key, "convoy"), {})[round_of(path)] = (
                b["tokens/s"], share(path[:-len(".out")] + ".noise"))
        if key and "peak_TFLOP/s" in b:
            # The multiply-add peak measured around this prefill, and the products' work per token.
            peaks.setdefault(key, {})[round_of(path)] = (b["peak_TFLOP/s"] * 1e12,
                                                         b["matmul_flop_per_token"])
for t in ["bf16", "f16", "q4_1"]:
    for path in rounds(f"llama-{t}-*-r*.out"):
        for test in json.load(open(path)):
            key = f"prefill{test['n_prompt']}" if test["n_gen"] == 0 else "decode"
            single.setdefault((key, f"llama-{t}"), {})[round_of(path)] = (
                test["avg_ts"], share(path[:-len(".out")] + ".noise"))


def clean(runs):
    """The rounds to use: those the other processes left alone, or all when none was."""
    quiet = {r: v for r, (v, sh) in runs.items() if sh is not None and sh <= retry_above}
    return quiet or {r: v for r, (v, _) in runs.items()}


def fmt(v, digits=1):
    if v is None or v != v:
        return "–"
    return f"{v:,.{digits}f}"


def pct(x):
    return "–" if x is None else f"{100 * x:.0f}%"


header = ["measurement", "convoy (bf16)"]
for t in ratio_types:
    header += [f"llama.cpp {label[t]}", f"convoy / llama.cpp {label[t]}"]
print("| " + " | ".join(header) + " |")
print("|" + "---|" * len(header))
names = {"prefill128": "single stream: prefill, 128-token prompt, tokens/s",
         "prefill512": "single stream: prefill, 512-token prompt, tokens/s",
         "decode": "single stream: decode at context 128, tokens/s"}
used = {}  # engine -> (rounds used, rounds run)
for key in ["prefill128", "prefill512", "decode"]:
    c_runs = single.get((key, "convoy"), {})
    c = clean(c_runs)
    used["convoy"] = (len(c), len(c_runs))
    row = [names[key], fmt(median(list(c.values())))]
    for t in ratio_types:
        l_runs = single.get((key, f"llama-{t}"), {})
        l = clean(l_runs)
        used[f"llama-{t}"] = (len(l), len(l_runs))
        if not c or not l:
            row += [fmt(median(list(l.values()))), "–"]
            continue
        cell = f"**{median(list(c.values())) / median(list(l.values())):.2f}x**"
        paired = [c[r] / l[r] for r in sorted(set(c) & set(l))]
        if len(paired) > 1:
            cell += f" ({min(paired):.2f}–{max(paired):.2f})"
        row += [fmt(median(list(l.values()))), cell]
    print("| " + " | ".join(row) + " |")
# The products' rate as a share of the machine's peak (cpu_forward_bench measures it around each
# prefill): llama.cpp's from its tokens/s, the same work per token and the peak of the same round.
# Only for the engines whose products run on the instruction measured (BF16 and F16 weights).
for key in ["prefill128", "prefill512"]:
    if not peaks.get(key):
        continue
    row = [names[key].replace("tokens/s", "products' share of the machine's peak")]

    def shares(engine):
        runs = clean(single.get((key, engine), {}))
        return [v * peaks[key][r][1] / peaks[key][r][0] for r, v in runs.items() if r in peaks[key]]
    row.append(pct(median(shares("convoy"))) if shares("convoy") else "–")
    for t in ratio_types:
        row += [pct(median(shares(f"llama-{t}"))) if t != "q4_1" and shares(f"llama-{t}") else "–",
                ""]
    print("| " + " | ".join(row) + " |")
row = ["single stream: rounds used (others took at most "
       f"{retry_above:.0%} of the CPUs) / run"]
for e in ["convoy"] + [f"llama-{t}" for t in ratio_types]:
    row.append(f"{used[e][0]} / {used[e][1]}" if e in used else "–")
    if e != "convoy":
        row.append("")
print("| " + " | ".join(row) + " |")


def load_run(point, engine):
    path = f"{out}/serve/{point}-{engine}.json"
    if not os.path.exists(path):
        return None
    run = json.load(open(path))
    if run.get("error"):
        return None
    return next((c for c in run["classes"] if c["name"] == "all"), None)


def missing(engine):  # the cell of a run that did not give results
    return "failed" if engine == "convoy" or engine[len("llama-"):] in serve_types else "not run"


slo_ttft = float(machine["slo_ttft_ms"]) / 1e3
slo_itl = float(machine["slo_itl_ms"]) / 1e3


def p99_met(a):
    return (a is not None and a["sent"] > 0 and a["completed"] == a["sent"]
            and a["ttft_s"]["p99"] <= slo_ttft and a["itl_s"]["p99"] <= slo_itl)


points = [f"c{c}" for c in machine["closed"].split()] + [f"r{r}" for r in machine["rates"].split()]
if machine.get("big_users"):
    points.append(f"c{machine['big_users']}")


def point_name(p):
    if p.startswith("c"):
        n = int(p[1:])
        return f"{n} user{'s' if n > 1 else ''} (closed loop)"
    return f"{p[1:]} req/s (Poisson)"


def latency_ms(key, p):
    return lambda a: a[key]["p" + p] * 1e3 if a[key].get("count") else None


metrics = [  # name, getter, digits
    ("output tokens/s", lambda a: a["output_tokens_per_s"], 0),
    ("goodput req/s", lambda a: a["goodput_rps"], 2),
    ("TTFT p50 ms", latency_ms("ttft_s", "50"), 0),
    ("TTFT p99 ms", latency_ms("ttft_s", "99"), 0),
    ("ITL p50 ms", latency_ms("itl_s", "50"), 1),
    ("ITL p99 ms", latency_ms("itl_s", "99"), 1),
]
for p in points:
    c = load_run(p, "convoy")
    if c is None and all(load_run(p, f"llama-{t}") is None for t in ratio_types):
        continue
    for name, get, digits in metrics:
        cv = get(c) if c else None
        row = [f"{point_name(p)}: {name}", fmt(cv, digits) if c else missing("convoy")]
        for t in ratio_types:
            l = load_run(p, f"llama-{t}")
            lv = get(l) if l else None
            row.append(fmt(lv, digits) if l else missing(f"llama-{t}"))
            row.append(f"**{cv / lv:.2f}x**" if cv is not None and lv else "–")
        print("| " + " | ".join(row) + " |")
    row = [f"{point_name(p)}: CPU share other processes took", pct(share(f"{out}/serve/{p}-convoy.noise"))]
    for t in ratio_types:
        row += [pct(share(f"{out}/serve/{p}-llama-{t}.noise")), ""]
    print("| " + " | ".join(row) + " |")
    row = [f"{point_name(p)}: completed / sent; p99 SLO met",
           f"{c['completed']}/{c['sent']}; {'yes' if p99_met(c) else 'no'}" if c else missing("convoy")]
    for t in ratio_types:
        l = load_run(p, f"llama-{t}")
        row += [f"{l['completed']}/{l['sent']}; {'yes' if p99_met(l) else 'no'}" if l
                else missing(f"llama-{t}"), ""]
    print("| " + " | ".join(row) + " |")

rate_points = [p for p in points if p.startswith("r")]
if rate_points:
    def best_rate(engine):
        ok = [float(p[1:]) for p in rate_points if p99_met(load_run(p, engine))]
        return max(ok) if ok else 0.0
    row = ["highest offered rate meeting the p99 SLO, req/s", fmt(best_rate("convoy"), 1)]
    for t in ratio_types:
        if t not in serve_types:
            row += ["not run", ""]
            continue
        b = best_rate(f"llama-{t}")
        row += [fmt(b, 1), f"**{best_rate('convoy') / b:.2f}x**" if b > 0 else "–"]
    print("| " + " | ".join(row) + " |")

print()
print(f"Machine: {machine['cpu']}, {machine['cores']} cores, {machine['mem']}; flags: "
      f"{machine['flags'].strip() or 'none of avx2/avx512/amx'}. Load average "
      f"{machine['load_before']} before, {machine.get('load_after', '?')} after.")
print(f"llama.cpp: llama-cpp-python {machine['llamacpp_version']} sdist, vendored llama.cpp "
      f"{machine['llamacpp_commit'] or 'commit unknown'}; convoy {machine['convoy_commit']} "
      f"(plus the working tree).")
print(f"Pinned to CPUs {machine['cpus']}, {machine['threads']} threads each; single stream: "
      f"median over {machine['rounds']} interleaved rounds, leaving out those the other "
      f"processes disturbed (the range of the per-round ratios in brackets).")
if peaks.get("prefill512"):
    peak = median([p for p, _ in peaks["prefill512"].values()])
    per_token = median([f for _, f in peaks["prefill512"].values()])
    print(f"The machine's peak: {peak / 1e12:.3f} TFLOP/s (median of the rounds; every thread "
          f"running chains of the bf16 dot-product instruction the products use, measured by "
          f"cpu_forward_bench right before and after each prefill). Twice llama.cpp BF16's prefill "
          f"would need the products at", end="")
    for key in ["prefill128", "prefill512"]:
        l = clean(single.get((key, "llama-bf16"), {}))
        if l:
            print(f" {pct(2 * median(list(l.values())) * per_token / peak)} of it "
                  f"({key[len('prefill'):]} tokens)", end=";" if key == "prefill128" else ".")
    print()
f16 = {k: median(list(clean(single.get((k, "llama-f16"), {})).values()))
       for k in ["prefill128", "prefill512", "decode"]}
print(f"llama.cpp F16 single stream (tokens/s): prefill 128 {fmt(f16['prefill128'])}, "
      f"prefill 512 {fmt(f16['prefill512'])}, decode {fmt(f16['decode'])}.")
print(f"Serving: workload {machine['workload']}, {machine['duration_s']} s per run, OpenAI "
      f"streamed /v1/completions; {machine['users']} slots on both servers"
      f"{f' ({b} for the {b}-user closed loop)' if (b := machine['big_users']) else ''}. "
      f"Goodput: requests/s with "
      f"TTFT <= {machine['slo_ttft_ms']} ms and mean inter-token latency <= "
      f"{machine['slo_itl_ms']} ms; p99 SLO: every request completed, TTFT p99 <= "
      f"{machine['slo_ttft_ms']} ms and ITL p99 <= {machine['slo_itl_ms']} ms.")
attempts = glob.glob(f"{out}/*/disturbed/*.noise")
print(f"Disturbance: before each measurement up to {machine['quiet_wait_s']} s of waiting for "
      f"the other processes to take under {float(machine['quiet_max']):.0%} of the CPUs; "
      f"{len(attempts)} attempt(s) during which they took over "
      f"{float(machine['retry_above']):.0%} were run again (up to {machine['retries']} more "
      f"times, the least disturbed attempt kept).")
print(f"Raw results: {out}")
EOF
