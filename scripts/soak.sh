#!/usr/bin/env bash
# Soak: convoyd under mixed load for a long time, for docs/reliability.md. Starts one convoyd on the
# default model (SmolLM2-135M-Instruct) with CONFIG, then for SOAK_S seconds runs at once:
#   - Poisson arrivals of bench/workloads/mixed.pbtxt (chat, RAG, background priorities) at RATE
#     requests/s over convoy's gRPC API (InferStream);
#   - closed loops of USERS chat users, one short run after another, over the OpenAI API and the
#     KServe v2 API in turn; each run ends with its requests in flight cancelled (--drain-s 1), so
#     that cancellations of running and queued requests happen all along.
# Every SAMPLE_S seconds it records convoyd's resident memory, threads and open file descriptors
# (/proc) and the KV cache and request gauges (/metrics). When the load stops it waits IDLE_S
# seconds and records them once more. Prints a Markdown table (first and last ten minutes, idle
# before and after) and the checks: idle after = idle before for file descriptors, KV blocks in use
# and requests held (none); no thread added after the first third of the run; resident memory's
# growth between the first and last third; every request answered (completed, refused, or
# cancelled by its client; none failed otherwise). Builds nothing.
#
#   scripts/soak.sh BUILD_DIR
#
# BUILD_DIR must hold convoyd and convoy-bench. Environment (all optional): SOAK_S (1800), RATE
# (1.5), USERS (4), CONFIG (configs/default.pbtxt), SAMPLE_S (10), IDLE_S (15), OUT_DIR (a new
# /tmp/convoy-soak-*: samples, JSON, logs).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
soak_s=${SOAK_S:-1800}
rate=${RATE:-1.5}
users=${USERS:-4}
config=${CONFIG:-configs/default.pbtxt}
sample_s=${SAMPLE_S:-10}
idle_s=${IDLE_S:-15}
out=${OUT_DIR:-$(mktemp -d /tmp/convoy-soak-XXXXXX)}
mkdir -p "$out"
bench=$build/bench/loadgen/convoy-bench
convoyd=$build/src/daemon/convoyd
# shellcheck source=scripts/lib/serving.sh
. scripts/lib/serving.sh
need_executables "$1" "$bench" "$convoyd"
model=$(scripts/fetch-default-model.sh)

pids=()
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  stop_convoyd
}
trap stop_all EXIT
start_convoyd "$convoyd" "$out" "$config" "$model"
daemon=$convoyd_pid
addr=$convoyd_addr
http=$convoyd_http

# One sample: the time, a label, RSS (kB), threads, file descriptors, then the gauges.
sample() {
  local rss threads fds gauges
  rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$daemon/status")
  threads=$(awk '/^Threads:/ { print $2 }' "/proc/$daemon/status")
  fds=$(find "/proc/$daemon/fd" -mindepth 1 -maxdepth 1 | wc -l)
  gauges=$(curl -sf "http://$http/metrics" | awk '
    /^convoy_kv_cache_blocks_used / { used = $2 }
    /^convoy_kv_cache_blocks_free / { free = $2 }
    /^convoy_num_requests_running / { running = $2 }
    /^convoy_num_requests_waiting / { waiting = $2 }
    END { print used + 0, free + 0, running + 0, waiting + 0 }')
  echo "$(date +%s.%N) $1 $rss $threads $fds $gauges"
}

# Idle before: after a few requests, so that the first step's allocations are made.
"$bench" run --addr "$addr" --workload bench/workloads/chat.pbtxt --requests 4 --concurrency 2 \
  --noprogress --json "$out/warmup.json" >"$out/warmup.txt" 2>&1
sleep "$idle_s"
sample idle-before >"$out/samples.txt"

end=$(($(date +%s) + soak_s))
echo "soak: $soak_s s of load (log and samples in $out) ..." >&2
"$bench" run --addr "$addr" --workload bench/workloads/mixed.pbtxt --rate "$rate" \
  --duration-s "$soak_s" --drain-s 120 --noprogress --label grpc-mixed \
  --json "$out/grpc-mixed.json" >"$out/grpc-mixed.txt" 2>"$out/grpc-mixed.err" &
pids+=($!)
(
  i=0
  while [ "$(date +%s)" -lt $((end - 20)) ]; do
    if [ $((i % 2)) -eq 0 ]; then protocol=openai; else protocol=kserve; fi
    "$bench" run --addr "$addr" --http-addr "$http" --protocol "$protocol" \
      --workload bench/workloads/chat.pbtxt --concurrency "$users" --duration-s 20 --drain-s 1 \
      --warmup 0 --noprogress --label "$protocol-$i" --json "$out/short-$i.json" \
      >"$out/short-$i.txt" 2>"$out/short-$i.err" || echo "short run $i exited $?" >>"$out/short-errors.txt"
    i=$((i + 1))
  done
) &
pids+=($!)
while [ "$(date +%s)" -lt "$end" ]; do
  sample load >>"$out/samples.txt"
  sleep "$sample_s"
done
wait "${pids[@]}"
pids=()
sleep "$idle_s"
sample idle-after >>"$out/samples.txt"
stop_all
trap - EXIT

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
echo "Machine: $cpu, $(nproc) cores. Model: SmolLM2-135M-Instruct (Q4_1 GGUF). Config: $config."
echo "Load for $soak_s s: mixed.pbtxt at $rate req/s over gRPC, and $users chat users over the"
echo "OpenAI and KServe APIs in 20 s runs that cancel what is in flight when they end. Samples"
echo "every $sample_s s. Results: $out."
echo
python3 - "$out" "$soak_s" <<'PY'
import glob, json, sys
out, soak_s = sys.argv[1], float(sys.argv[2])
rows = []
for line in open(f"{out}/samples.txt"):
    t, label, rss, threads, fds, used, free, running, waiting = line.split()
    rows.append(dict(t=float(t), label=label, rss=int(rss) / 1024, threads=int(threads),
                     fds=int(fds), used=int(float(used)), free=int(float(free)),
                     running=int(float(running)), waiting=int(float(waiting))))
before = next(r for r in rows if r["label"] == "idle-before")
after = next(r for r in rows if r["label"] == "idle-after")
load = [r for r in rows if r["label"] == "load"]
t0 = load[0]["t"]
def window(a, b):
    return [r for r in load if a <= r["t"] - t0 < b]
def span(rs, key):
    return f"{min(r[key] for r in rs):.0f}-{max(r[key] for r in rs):.0f}" if rs else "-"
first, last = window(0, 600), window(soak_s - 600, soak_s + 60)
print("| when | RSS MiB | threads | fds | KV blocks used | running | waiting |")
print("|---|---|---|---|---|---|---|")
print(f"| idle before | {before['rss']:.0f} | {before['threads']} | {before['fds']} | {before['used']} "
      f"| {before['running']} | {before['waiting']} |")
for name, rs in (("first 10 min of load", first), ("last 10 min of load", last)):
    print(f"| {name} | {span(rs, 'rss')} | {span(rs, 'threads')} | {span(rs, 'fds')} "
          f"| {span(rs, 'used')} | {span(rs, 'running')} | {span(rs, 'waiting')} |")
print(f"| idle after | {after['rss']:.0f} | {after['threads']} | {after['fds']} | {after['used']} "
      f"| {after['running']} | {after['waiting']} |")
print()
third = soak_s / 3
early = [r["rss"] for r in window(0, third)]
late = [r["rss"] for r in window(2 * third, soak_s + 60)]
sent = completed = refused = failed = cancelled = 0
for path in [f"{out}/grpc-mixed.json"] + sorted(glob.glob(f"{out}/short-*.json")):
    r = json.load(open(path))
    a = next(c for c in r["classes"] if c["name"] == "all")
    sent += a["sent"]
    completed += a["completed"]
    refused += a.get("refused", 0)
    cancelled += a.get("cancelled", 0)
    failed += a["failed"] - a.get("refused", 0) - a.get("cancelled", 0)
runs = len(glob.glob(f"{out}/short-*.json"))
print(f"- requests: {sent} sent, {completed} completed, {refused} refused for load, {cancelled} "
      f"cancelled by their client, {failed} failed otherwise ({runs} short OpenAI/KServe runs)")
# gRPC and the HTTP server start threads as load needs them and keep them: the check is that none
# are added after the first third, and that none stay busy (they are counted, not held).
early_threads = max(r["threads"] for r in window(0, third))
print(f"- threads idle before / most in the first third / idle after: {before['threads']} / "
      f"{early_threads} / {after['threads']}; file descriptors idle before / after: "
      f"{before['fds']} / {after['fds']}; KV blocks in use idle before / after: {before['used']} / "
      f"{after['used']}; requests running + waiting after: {after['running'] + after['waiting']}")
print(f"- RSS: at most {max(early):.0f} MiB in the first third of the load, {max(late):.0f} MiB in "
      f"the last ({max(late) / max(early):.3f}x); idle {before['rss']:.0f} MiB before, "
      f"{after['rss']:.0f} MiB after")
ok = (after["threads"] <= max(early_threads, before["threads"]) and after["fds"] == before["fds"]
      and after["used"] == before["used"] and after["running"] + after["waiting"] == 0
      and failed == 0)
print(f"- {'PASSED' if ok else 'FAILED'}: nothing held once idle and nothing failed")
sys.exit(0 if ok else 1)
PY
