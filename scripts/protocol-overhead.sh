#!/usr/bin/env bash
# What each protocol costs per request, side by side, for docs/perf/protocols.md: starts one
# convoyd on a small random model, then sends the same workload with the same closed-loop
# concurrency over convoy's native gRPC API, the OpenAI HTTP API and KServe v2 gRPC
# (convoy-bench run --protocol native|openai|kserve), back to back, ROUNDS times, and prints a
# Markdown table per round: TTFT p50/p99, ITL p50, end-to-end p50/p99, throughput, the CPU time
# convoyd (all of it, and its gRPC and HTTP threads') and convoy-bench spent per request, and each
# protocol's TTFT and end-to-end as a ratio of native's in the same round. Builds nothing.
#
#   scripts/protocol-overhead.sh BUILD_DIR
#
# BUILD_DIR must hold convoyd, convoy-bench and convoy-mkmodel (e.g. cmake --build BUILD_DIR
# --target convoyd convoy-bench convoy-mkmodel). Environment (all optional): REQUESTS (200 per
# run), CONCURRENCY (4), WORKLOAD (bench/workloads/chat.pbtxt), CONFIG (configs/default.pbtxt),
# ROUNDS (2), MODEL_ARGS (convoy-mkmodel flags; default the tiny preset), OUT_DIR (a new
# /tmp/convoy-protocols-*: JSON results, logs). Markdown on stdout, progress on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
requests=${REQUESTS:-200}
concurrency=${CONCURRENCY:-4}
workload=${WORKLOAD:-bench/workloads/chat.pbtxt}
config=${CONFIG:-configs/default.pbtxt}
rounds=${ROUNDS:-2}
model_args=${MODEL_ARGS:---preset tiny}
out=${OUT_DIR:-$(mktemp -d /tmp/convoy-protocols-XXXXXX)}
mkdir -p "$out"

bench=$build/bench/loadgen/convoy-bench
convoyd=$build/src/daemon/convoyd
mkmodel=$build/src/tools/convoy-mkmodel
# shellcheck source=scripts/lib/serving.sh
. scripts/lib/serving.sh
need_executables "$1" "$bench" "$convoyd" "$mkmodel"

# shellcheck disable=SC2086
"$mkmodel" $model_args --seed 1 --out "$out/model" >"$out/model.txt"

trap stop_convoyd EXIT
start_convoyd "$convoyd" "$out" "$config" "$out/model"
daemon=$convoyd_pid
addr=$convoyd_addr
http_addr=$convoyd_http

# CPU seconds convoyd has used so far (user + system): all of it, and that of its threads named
# convoyd (the main thread, the engine loop, the executor's workers). The rest is gRPC's threads
# and the HTTP server's io threads, whose names are their own.
ticks=$(getconf CLK_TCK)
server_cpu() {
  local total own=0 task
  total=$(awk '{ print $14 + $15 }' "/proc/$daemon/stat")
  for task in /proc/"$daemon"/task/*; do
    if [ "$(cat "$task/comm" 2>/dev/null)" = convoyd ]; then
      own=$((own + $(awk '{ print $14 + $15 }' "$task/stat" 2>/dev/null || echo 0)))
    fi
  done
  awk -v t="$ticks" -v total="$total" -v own="$own" \
    'BEGIN { printf "%.2f %.2f", total / t, (total - own) / t }'
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
protocols=(native openai kserve)
TIMEFORMAT='%3U %3S'
seed=100
for round in $(seq "$rounds"); do
  for protocol in "${protocols[@]}"; do
    echo "round $round: $protocol ($requests requests, concurrency $concurrency) ..." >&2
    run=$out/round$round-$protocol
    before=$(server_cpu)
    # convoy-bench waits for the server to be SERVING before it sends. Each run draws its own
    # prompts (--seed), so that none finds the prompts of the run before in the prefix cache.
    seed=$((seed + 1))
    { time "$bench" run --addr "$addr" --http-addr "$http_addr" --protocol "$protocol" \
      --workload "$workload" --requests "$requests" --concurrency "$concurrency" --seed "$seed" \
      --label "$protocol" --noprogress --json "$run.json" >"$run.txt" 2>"$run.err"; } \
      2>"$run.time"
    echo "$before $(server_cpu)" >"$run.server-cpu"
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
stop_convoyd
trap - EXIT

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
family=$(lscpu | sed -n 's/^CPU family: *//p' | head -n 1)
model=$(lscpu | sed -n 's/^Model: *//p' | head -n 1)
echo "Machine: $cpu (family $family, model $model), $(nproc) cores; load average (1, 5, 15 min)"
echo "$load_before before the runs, $load_after after."
echo "Model: random Llama, $(sed 's/^convoy-mkmodel: //' "$out/model.txt")."
echo "Workload: $workload, $requests requests per run, closed loop with $concurrency in flight;"
echo "server config $config. Results: $out."
echo
python3 - "$out" "$rounds" "${protocols[@]}" <<'EOF'
import json
import sys

out, rounds, protocols = sys.argv[1], int(sys.argv[2]), sys.argv[3:]


def load(round_, protocol):
    path = f"{out}/round{round_}-{protocol}"
    with open(f"{path}.json") as f:
        run = json.load(f)
    result = next(c for c in run["classes"] if c["name"] == "all")
    # CPU milliseconds per request sent (warm-up requests included in the server's).
    with open(f"{path}.server-cpu") as f:
        total0, io0, total1, io1 = map(float, f.read().split())
    with open(f"{path}.time") as f:
        user, system = map(float, f.read().split())
    result["server_cpu_ms"] = (total1 - total0) * 1e3 / result["sent"]
    result["server_io_cpu_ms"] = (io1 - io0) * 1e3 / result["sent"]
    result["bench_cpu_ms"] = (user + system) * 1e3 / result["sent"]
    return result


def ms(summary, key):
    return summary[key] * 1e3


results = {(r, p): load(r, p) for r in range(1, rounds + 1) for p in protocols}
for r in range(1, rounds + 1):
    native = results[(r, "native")]
    print(f"Round {r}:\n")
    print("| protocol | completed | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | E2E p50 ms | "
          "E2E p99 ms | req/s | output tok/s | server CPU ms/req | of which I/O threads | "
          "bench CPU ms/req | TTFT p50 / native | E2E p50 / native |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p in protocols:
        a = results[(r, p)]
        ttft_ratio = a["ttft_s"]["p50"] / native["ttft_s"]["p50"]
        e2e_ratio = a["e2e_s"]["p50"] / native["e2e_s"]["p50"]
        print(f"| {p} | {a['completed']}/{a['sent']} | {ms(a['ttft_s'], 'p50'):.2f} | "
              f"{ms(a['ttft_s'], 'p99'):.2f} | {ms(a['itl_s'], 'p50'):.2f} | "
              f"{ms(a['e2e_s'], 'p50'):.1f} | {ms(a['e2e_s'], 'p99'):.1f} | "
              f"{a['requests_per_s']:.2f} | {a['output_tokens_per_s']:.0f} | "
              f"{a['server_cpu_ms']:.2f} | {a['server_io_cpu_ms']:.2f} | "
              f"{a['bench_cpu_ms']:.2f} | "
              f"{ttft_ratio:.2f} | {e2e_ratio:.2f} |")
    print()
if rounds > 1:
    print("Round to round (last round / first round, same protocol):\n")
    print("| protocol | TTFT p50 | E2E p50 | output tok/s | server CPU/req |")
    print("|---|---|---|---|---|")
    for p in protocols:
        first, last = results[(1, p)], results[(rounds, p)]
        print(f"| {p} | {last['ttft_s']['p50'] / first['ttft_s']['p50']:.2f} | "
              f"{last['e2e_s']['p50'] / first['e2e_s']['p50']:.2f} | "
              f"{last['output_tokens_per_s'] / first['output_tokens_per_s']:.2f} | "
              f"{last['server_cpu_ms'] / first['server_cpu_ms']:.2f} |")
EOF
