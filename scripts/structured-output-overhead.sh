#!/usr/bin/env bash
# Decode time per output token with and without a JSON-schema constraint (and with penalties and
# a logit bias instead), at 1 and 16 concurrent requests, ROUNDS (default 2) interleaved rounds:
# convoyd on the default model (build/ built, the model fetched by scripts/fetch-default-model.sh),
# `convoy generate --json` per request, the decode time per token from each answer's timings
# ((total - time to first token) / (tokens - 1)). Prints the median and mean over the requests of
# each run, and how many ran to MAX_TOKENS (default 96): where all of them do in both runs, the
# two compare steps of the same batch at the same context lengths (with fewer, a run whose answers
# end sooner decodes its last tokens in smaller batches, which moves its per-token time more than
# a constraint does).
# docs/perf/cpu.md section 14.
set -u
cd "$(dirname "$0")/.."
B=build/src/daemon
$B/convoyd --model "${CONVOY_MODELS_DIR:-models}/SmolLM2-135M-Instruct.Q4_1.gguf" --listen-address 127.0.0.1 --port 50091 --http-port 0 --metrics-port 0 > /tmp/measure_convoyd.log 2>&1 &
pid=$!
for i in $(seq 60); do $B/convoy health --addr 127.0.0.1:50091 >/dev/null 2>&1 && break; sleep 0.5; done
schema=/tmp/measure_schema.json
echo '{"type":"object","properties":{"name":{"type":"string","maxLength":200},"items":{"type":"array","items":{"type":"string","maxLength":40},"maxItems":20}},"required":["name","items"]}' > $schema
run() {  # run N FLAGS...
  local n=$1; shift
  local pids=()
  for i in $(seq $n); do
    $B/convoy generate --addr 127.0.0.1:50091 --chat "List some fruits as JSON." --max-tokens "${MAX_TOKENS:-96}" --temperature 1 --seed $i --json "$@" > /tmp/measure_out_$i.json & pids+=($!)
  done
  wait "${pids[@]}"
  python3 - "$n" "${MAX_TOKENS:-96}" <<'PY'
import json, sys
n, max_tokens = int(sys.argv[1]), int(sys.argv[2]); per = []; full = 0
for i in range(1, n + 1):
    j = json.loads(open(f"/tmp/measure_out_{i}.json").read().strip().splitlines()[-1])
    t = j["timings"]; k = j["usage"]["completion_tokens"]
    if k > 1: per.append((t["total_us"] - t["time_to_first_token_us"]) / (k - 1))
    full += k == max_tokens
per.sort()
print(f"  {len(per)} requests ({full} to {max_tokens} tokens), decode us/token: median {per[len(per)//2]:.0f}, mean {sum(per)/len(per):.0f}")
PY
}
for n in 1 16; do
  for round in $(seq "${ROUNDS:-2}"); do
    echo "n=$n round $round free:"; run $n
    echo "n=$n round $round schema:"; run $n --json-schema $schema
    echo "n=$n round $round penalties and bias:"
    run $n --presence-penalty 0.5 --frequency-penalty 0.5 --repetition-penalty 1.1 --logit-bias 28=-5,30=2
  done
done
kill $pid; wait $pid 2>/dev/null
