#!/usr/bin/env bash
# Overload: what convoyd does at ten times the load it can serve, for docs/reliability.md. Starts
# one convoyd on the default model (SmolLM2-135M-Instruct) with configs/latency.pbtxt (a short
# queue: refuse at once rather than queue for long), then, with convoy-bench over convoy's gRPC API
# and the chat workload:
#   1. capacity: a closed loop of CONCURRENCY users for CAPACITY_S seconds; its completed req/s is
#      the load the server sustains here;
#   2. baseline: Poisson arrivals at half the capacity for PHASE_S seconds;
#   3. overload: Poisson arrivals at FACTOR (10) times the capacity for OVERLOAD_S (120) seconds;
#   4. recovery: half the capacity again for PHASE_S seconds, started as soon as the overload ends.
# convoyd's resident memory is read from /proc once a second throughout. Prints a Markdown table:
# per phase the requests sent, completed, refused for load (RESOURCE_EXHAUSTED) and failed
# otherwise, how fast refusals came (p50, p99, max), TTFT p50/p99, and the RSS; then the checks
# (nothing failed but refusals, RSS bounded, recovery's TTFT against baseline's) and the refusal
# latency the server measured (convoy_request_refusal_seconds). Builds nothing.
#
#   scripts/overload.sh BUILD_DIR
#
# BUILD_DIR must hold convoyd and convoy-bench. Environment (all optional): FACTOR (10),
# OVERLOAD_S (120), PHASE_S (30), CAPACITY_S (30), CONCURRENCY (16), CONFIG
# (configs/latency.pbtxt), OUT_DIR (a new /tmp/convoy-overload-*: JSON, logs, RSS samples),
# SERVER_CPUS and CLIENT_CPUS (taskset lists: the server and convoy-bench on CPUs of their own, as
# with a client on another machine; executor.cpu_threads 0, the shipped configs' value, takes as
# many threads as the server may use CPUs; default: both share every CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
factor=${FACTOR:-10}
overload_s=${OVERLOAD_S:-120}
phase_s=${PHASE_S:-30}
capacity_s=${CAPACITY_S:-30}
concurrency=${CONCURRENCY:-16}
config=${CONFIG:-configs/latency.pbtxt}
workload=bench/workloads/chat.pbtxt
out=${OUT_DIR:-$(mktemp -d /tmp/convoy-overload-XXXXXX)}
mkdir -p "$out"
bench=$build/bench/loadgen/convoy-bench
convoyd=$build/src/daemon/convoyd
# shellcheck source=scripts/lib/serving.sh
. scripts/lib/serving.sh
need_executables "$1" "$bench" "$convoyd"
model=$(scripts/fetch-default-model.sh)

client_pin=()
[ -n "${CLIENT_CPUS:-}" ] && client_pin=(taskset -c "$CLIENT_CPUS")
sampler=""
stop_all() {
  [ -n "$sampler" ] && kill "$sampler" 2>/dev/null
  stop_convoyd
}
trap stop_all EXIT
start_convoyd "$convoyd" "$out" "$config" "$model"
daemon=$convoyd_pid
addr=$convoyd_addr

# RSS (kB) once a second, with the time since the start.
start=$(date +%s.%N)
(
  while kill -0 "$daemon" 2>/dev/null; do
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$daemon/status" 2>/dev/null || true)
    threads=$(awk '/^Threads:/ { print $2 }' "/proc/$daemon/status" 2>/dev/null || true)
    [ -n "$rss" ] && echo "$(date +%s.%N) $rss $threads"
    sleep 1
  done
) >"$out/rss.txt" &
sampler=$!

# Each phase draws other prompts (--seed): with the same ones, a phase would find the prompts of
# the phase before it in the prefix cache, and the baseline (after the capacity run) would be
# served from cache while the recovery (after the overload had evicted it) would not.
phase_seed=100
phase() {  # phase NAME convoy-bench-run-arguments...
  local name=$1
  shift
  phase_seed=$((phase_seed + 1))
  echo "$name ..." >&2
  echo "$name $(date +%s.%N)" >>"$out/phases.txt"
  "${client_pin[@]}" "$bench" run --addr "$addr" --workload "$workload" --label "$name" --noprogress --drain-s 120 \
    --seed "$phase_seed" --json "$out/$name.json" "$@" >"$out/$name.txt" 2>"$out/$name.err"
  echo "$name-end $(date +%s.%N)" >>"$out/phases.txt"
}

phase capacity --concurrency "$concurrency" --duration-s "$capacity_s"
capacity=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); \
print(next(c for c in r['classes'] if c['name']=='all')['requests_per_s'])" "$out/capacity.json")
half=$(python3 -c "print(f'{$capacity / 2:.4g}')")
over=$(python3 -c "print(f'{$capacity * $factor:.4g}')")
phase baseline --rate "$half" --duration-s "$phase_s"
scrape() {  # scrape FILE: convoyd's /metrics (on its HTTP port) into FILE
  python3 -c "import sys, urllib.request; \
sys.stdout.write(urllib.request.urlopen('http://$convoyd_http/metrics', timeout=30).read().decode())" \
    >"$1"
}
scrape "$out/metrics-before-overload.txt"
phase overload --rate "$over" --duration-s "$overload_s"
scrape "$out/metrics-after-overload.txt"
phase recovery --rate "$half" --duration-s "$phase_s"
kill "$sampler" 2>/dev/null || true
sampler=""
stop_all
trap - EXIT

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
echo "Machine: $cpu, $(nproc) cores. Model: SmolLM2-135M-Instruct (Q4_1 GGUF). Config: $config."
echo "Workload: $workload over convoy's gRPC API. Capacity (closed loop, $concurrency users):"
echo "$capacity req/s; baseline and recovery at $half req/s, overload at $over req/s ($factor x)"
echo "for $overload_s s. Results: $out."
echo
python3 - "$out" "$start" <<'PY'
import json, math, sys
out, start = sys.argv[1], float(sys.argv[2])
rss = []
for line in open(f"{out}/rss.txt"):
    t, kb, threads = line.split()
    rss.append((float(t), int(kb) / 1024, int(threads)))
marks = dict((name, float(t)) for name, t in (l.split() for l in open(f"{out}/phases.txt")))
def rss_in(a, b):
    xs = [m for t, m, _ in rss if a <= t <= b]
    return (max(xs), xs[-1]) if xs else (float("nan"), float("nan"))
def threads_in(a, b):
    xs = [n for t, _, n in rss if a <= t <= b]
    return max(xs) if xs else 0
def ms(x, key, p):
    v = x[key].get(p)
    return float("nan") if v is None else v * 1e3
rows, results = [], {}
print("| phase | offered req/s | sent | completed | refused | other failures | refusal p50 / p99 / max ms "
      "| TTFT p50 / p99 ms | RSS max / end MiB | threads max |")
print("|---|---|---|---|---|---|---|---|---|---|")
for name in ("capacity", "baseline", "overload", "recovery"):
    r = json.load(open(f"{out}/{name}.json"))
    a = next(c for c in r["classes"] if c["name"] == "all")
    results[name] = a
    top, end = rss_in(marks[name], marks[f"{name}-end"])
    offered = f"{r['offered_rps']:.3g}" if r["offered_rps"] else f"closed, {r['concurrency']}"
    other = a["failed"] - a.get("refused", 0)
    refusal = (f"{ms(a, 'refusal_s', 'p50'):.2f} / {ms(a, 'refusal_s', 'p99'):.2f} / "
               f"{ms(a, 'refusal_s', 'max'):.2f}") if a.get("refused") else "-"
    print(f"| {name} | {offered} | {a['sent']} | {a['completed']} | {a.get('refused', 0)} | {other} "
          f"| {refusal} | {ms(a, 'ttft_s', 'p50'):.0f} / {ms(a, 'ttft_s', 'p99'):.0f} "
          f"| {top:.0f} / {end:.0f} | {threads_in(marks[name], marks[name + '-end'])} |")
print()
base, over, rec = results["baseline"], results["overload"], results["recovery"]
fails = sum(results[n]["failed"] - results[n].get("refused", 0) for n in results)
base_top = rss_in(marks["baseline"], marks["baseline-end"])[0]
over_top = rss_in(marks["overload"], marks["overload-end"])[0]
print(f"- failures other than refusals for load, all phases: {fails}")
print(f"- refused during the overload: {over.get('refused', 0)} of {over['sent']} sent; "
      f"refusal p99 {ms(over, 'refusal_s', 'p99'):.2f} ms (target: under 1 ms)")
# The server's own view: convoy_request_refusal_seconds over the overload (arrival at the front
# end to the refusal), as the bucket bounds that hold the quantiles.
def buckets(path):
    b = {}
    for line in open(path):
        if line.startswith("convoy_request_refusal_seconds_bucket{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            b[float(le)] = float(line.rsplit(" ", 1)[1])
    return b
before = buckets(f"{out}/metrics-before-overload.txt")
after = buckets(f"{out}/metrics-after-overload.txt")
delta = sorted((le, after[le] - before.get(le, 0)) for le in after)
count = delta[-1][1] if delta else 0
def bound(q):
    for le, n in delta:
        if n >= q * count:
            return "more than 5 s" if math.isinf(le) else f"at most {le * 1e3:g} ms"
    return "-"
if count:
    print(f"- refusals measured by the server (convoy_request_refusal_seconds, {count:.0f} in the "
          f"overload): p50 {bound(0.5)}, p99 {bound(0.99)}")
print(f"- RSS: {base_top:.0f} MiB at most in the baseline, {over_top:.0f} MiB at most in the overload "
      f"({over_top / base_top:.2f}x)")
print(f"- recovery TTFT p50 {ms(rec, 'ttft_s', 'p50'):.0f} ms against the baseline's "
      f"{ms(base, 'ttft_s', 'p50'):.0f} ms ({ms(rec, 'ttft_s', 'p50') / ms(base, 'ttft_s', 'p50'):.2f}x); "
      f"recovery completed {rec['completed']} of {rec['sent']}")
PY
