#!/usr/bin/env bash
# The whole GPU check in one call of the device machine (it has nvcc, cuBLAS, PyTorch and
# transformers, but no network, Abseil, gRPC, GoogleTest or oneDNN), in two steps:
#
#   1. On a build machine (the CUDA toolkit, no GPU needed):  scripts/gpu-check.sh build
#      Builds the GPU tests, the benchmark, convoyd, its client, convoy-mkmodel and convoy-bench
#      into build-gpu/ (sm_90, no -march=native) and packs them with every shared library they
#      need except glibc, libcuda and cuBLAS into build-gpu/carry/bundle.tar.xz (about 15 MB).
#   2. Copy the repository with build-gpu/carry/ to the GPU machine and run there, from it:
#        OUT=DIR scripts/gpu-check.sh device [PART...]
#      with a wall-clock limit of CONVOY_GPU_BUDGET_S plus a minute where the machine's time is
#      bounded.
#      PARTs (default: all, in this order): tests (kernels, CPU-vs-GPU parity, scheduler parity
#      under every shipped config), bench (gpu_bench), serve (convoyd on the GPU with a random
#      Llama-3.2-1B, a convoy-bench run, a SIGTERM drain under load), peer (transformers with a
#      static KV cache under torch.compile, decode at batch 1 and 64 in gpu_bench's shape),
#      baseline (transformers' static batching on the same model and workload). Every part runs
#      inside the budget (CONVOY_GPU_BUDGET_S, default 420 s): a part that would overrun is cut
#      short, and the table is printed last whatever happened. Full logs go under $OUT. Exits
#      non-zero when any part failed or no GPU is usable: a run that skipped everything must never
#      look like a pass.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}

build() {
  set -e
  local dir=build-gpu
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCONVOY_ENABLE_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_FLAGS=-lineinfo -DCONVOY_NATIVE=OFF >/dev/null
  local bins=(tests/kernels/kernels_test tests/kernels/cuda_executor_test
    tests/kernels/cuda_scheduler_parity_test bench/gpu/gpu_bench src/daemon/convoyd
    src/daemon/convoy src/tools/convoy-mkmodel bench/loadgen/convoy-bench)
  local targets=()
  for b in "${bins[@]}"; do targets+=("$(basename "$b")"); done
  cmake --build "$dir" -j "${CONVOY_BUILD_JOBS:-$(nproc)}" --target "${targets[@]}"
  local stage="$dir/stage"
  rm -rf "$stage" "$dir/carry"
  mkdir -p "$stage/bin" "$stage/lib" "$dir/carry"
  for b in "${bins[@]}"; do cp "$dir/$b" "$stage/bin/"; done
  # The commit the binaries were built from, with "+" when the tree had changes: the device
  # machine's copy of the repository may carry another .git.
  local commit
  commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  git diff --quiet HEAD 2>/dev/null || commit="$commit+"
  echo "$commit" >"$stage/COMMIT"
  # Every shared library the binaries load, except the C library, the driver and cuBLAS.
  for bin in "$stage"/bin/*; do
    ldd "$bin" | awk '/=> \// {print $3}'
  done | sort -u | grep -vE '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libcuda|libcublas|libcublasLt)\.so' |
    while read -r lib; do cp -L "$lib" "$stage/lib/"; done
  strip --strip-unneeded "$stage"/bin/* "$stage"/lib/* 2>/dev/null || true
  tar -C "$stage" -cJf "$dir/carry/bundle.tar.xz" bin lib COMMIT
  du -h "$dir/carry/bundle.tar.xz"
  echo "now: device run with carry [\"$dir/carry\"] and command: scripts/gpu-check.sh device"
}

# Prints the directory holding libcublas.so.13: the loader's cache, the CUDA install, then any
# copy on the disk (a Python wheel's nvidia/cublas/lib, say).
# CONVOY_CUDA_HOME and CONVOY_CUBLAS_SEARCH_ROOT change where it looks (tests).
find_cublas() {
  local lib cuda=${CONVOY_CUDA_HOME:-/usr/local/cuda}
  lib=$(ldconfig -p 2>/dev/null | awk '/libcublas\.so\.13 / {print $NF; exit}')
  if [ -z "$lib" ]; then
    for d in "$cuda/lib64" "$cuda/targets/x86_64-linux/lib" "$cuda/lib"; do
      [ -e "$d/libcublas.so.13" ] && { lib="$d/libcublas.so.13"; break; }
    done
  fi
  if [ -z "$lib" ]; then
    lib=$(find "${CONVOY_CUBLAS_SEARCH_ROOT:-/}" -xdev \( -path /proc -o -path /sys \) -prune -o \
      -name 'libcublas.so.13' -print 2>/dev/null | head -n 1)
  fi
  [ -n "$lib" ] && dirname "$lib"
}

device() {
  shift || true
  local parts=("$@")
  [ ${#parts[@]} -eq 0 ] && parts=(tests bench serve peer baseline)
  # Logs gather in a scratch folder and come back as one archive (the device tool returns at most
  # eight files), beside the table.
  local final=${OUT:-/tmp/gpu-check-out} out
  if ! out=$(mktemp -d) || [ ! -d "$out" ]; then
    echo "gpu-check: mktemp -d failed" >&2
    exit 1
  fi
  # shellcheck disable=SC2064 # out is fixed now; the archive in $final keeps every log
  trap "rm -rf '$out'" EXIT
  mkdir -p "$final"
  local budget=${CONVOY_GPU_BUDGET_S:-420}
  local deadline=$((SECONDS + budget))
  local bundle=${CONVOY_GPU_BUNDLE:-build-gpu/carry/bundle.tar.xz}
  local root=${CONVOY_GPU_ROOT:-/tmp/convoy-gpu}
  local rows=() failed=0
  export CONVOY_REQUIRE_GPU=1  # a GPU test that would skip fails instead

  table() {
    {
      echo
      echo "=== GPU check: $(date -u +%F), binaries of $(cat "$root/COMMIT" 2>/dev/null || echo "an unknown commit") ==="
      echo "| what | result |"
      echo "| --- | --- |"
      printf '%s\n' "${rows[@]}"
      [ "$failed" -eq 0 ] && echo "GPU CHECK PASSED" || echo "GPU CHECK FAILED ($failed failures)"
    } | tee "$final/table.md"
    tar -C "$out" -czf "$final/gpu-check-logs.tgz" . 2>/dev/null
  }
  fail_now() {
    echo "!!!!!!!! GPU CHECK FAILED: $1 !!!!!!!!"
    rows+=("| setup | FAILED: $1 |")
    failed=$((failed + 1))
    table
    exit 1
  }

  case "$root" in /*/*) ;; *) fail_now "CONVOY_GPU_ROOT must be a folder below /, not '$root'" ;; esac
  rm -rf "$root" && mkdir -p "$root"
  tar -C "$root" -xJf "$bundle" || fail_now "no bundle at $bundle: run scripts/gpu-check.sh build here"
  local cublas_dir
  cublas_dir=$(find_cublas)
  [ -n "$cublas_dir" ] || fail_now "libcublas.so.13 not found on this machine"
  echo "cuBLAS: $cublas_dir"
  export LD_LIBRARY_PATH="$root/lib:$cublas_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv \
    >"$out/nvidia-smi.txt" 2>&1 || fail_now "nvidia-smi finds no usable GPU ($(head -c 200 "$out/nvidia-smi.txt"))"
  cat "$out/nvidia-smi.txt"
  if ldd "$root/bin/gpu_bench" | grep "not found" | tee "$out/ldd.txt" | grep -q .; then
    fail_now "libraries missing: $(tr '\n' ' ' <"$out/ldd.txt")"
  fi
  rows+=("| machine | $(tail -n 1 "$out/nvidia-smi.txt"); cuBLAS from $cublas_dir |")

  # Seconds a part may take: its own cap, or what is left before the deadline less 15 s for the
  # table, whichever is less.
  allowance() {
    local cap=$1 left=$((deadline - SECONDS - 15))
    [ "$left" -lt "$cap" ] && cap=$left
    echo $((cap > 0 ? cap : 0))
  }
  # run NAME CAP CMD...: runs CMD under its allowance, logs to $out/NAME.log, adds a row.
  run_step() {
    local name=$1 limit
    limit=$(allowance "$2")
    shift 2
    if [ "$limit" -le 0 ]; then
      rows+=("| $name | NOT RUN: the budget was spent |")
      failed=$((failed + 1))
      return 1
    fi
    local start=$SECONDS
    timeout -k 5 "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    local took=$((SECONDS - start)) detail=""
    if grep -qE '^\[==========\]' "$out/$name.log"; then
      detail=", $(grep -cE '^\[       OK \]' "$out/$name.log") ok, $(grep -cE '^\[  FAILED  \]' "$out/$name.log") failed lines, $(grep -cE '^\[  SKIPPED \]' "$out/$name.log") skipped"
    fi
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
      rows+=("| $name | TIMED OUT after ${limit} s$detail |")
    elif [ "$rc" -ne 0 ]; then
      rows+=("| $name | FAILED: exit $rc in ${took} s$detail |")
    else
      rows+=("| $name | ok in ${took} s$detail |")
    fi
    echo "--- $name (exit $rc, ${took} s), last lines:"
    tail -n 12 "$out/$name.log"
    [ "$rc" -eq 0 ] || failed=$((failed + 1))
    return "$rc"
  }

  local model=${CONVOY_GPU_MODEL_DIR:-/tmp/convoy-llama-1b}
  for part in "${parts[@]}"; do
    case "$part" in
      tests)
        # Twice in one process: a kernel that reads memory an earlier launch left behind fails
        # only on a later launch.
        run_step kernels_test 60 "$root/bin/kernels_test" --gtest_repeat=2
        if command -v compute-sanitizer >/dev/null; then
          run_step memcheck_kernels 60 compute-sanitizer --tool memcheck --error-exitcode 1 \
            "$root/bin/kernels_test" --gtest_filter='PagedAttention*:SamplingKernel*'
          # The GEMV's fusions index the normalized rows in shared memory and pair gate rows with
          # up rows: out-of-bounds accesses in either show here, not in a wrong sum.
          run_step memcheck_gemv_fusion 45 compute-sanitizer --tool memcheck --error-exitcode 1 \
            "$root/bin/kernels_test" --gtest_filter='GemvFusion.*'
          # The tensor-core prefill kernel stages K and V through shared memory asynchronously,
          # two stages deep: racecheck looks for a read of a stage before its copy landed or a
          # copy over a stage still being read.
          run_step racecheck_prefill 60 compute-sanitizer --tool racecheck --error-exitcode 1 \
            "$root/bin/kernels_test" --gtest_filter='PagedAttentionPrefillKernel.HeadDim*'
        fi
        run_step cuda_executor_test 90 "$root/bin/cuda_executor_test"
        run_step cuda_scheduler_parity_test 90 "$root/bin/cuda_scheduler_parity_test"
        while read -r line; do rows+=("$line"); done < <(
          grep -h '^GPU_CHECK kernel' "$out/kernels_test.log" | awk '!seen[$3]++ {printf "| kernel %s | rel err %s |\n", $3, $5}'
          grep -h '^GPU_CHECK sampler_agree' "$out/kernels_test.log" | awk '!seen[$1]++ {printf "| sampler: kernel vs CPU rule | same token %s |\n", $3}'
          grep -h '^GPU_CHECK sampler_extended_agree' "$out/kernels_test.log" | awk '!seen[$1]++ {printf "| sampler with allowed tokens, adjustments, min_p: kernel vs CPU | same token %s |\n", $3}'
          grep -h '^GPU_CHECK constrained_seeded_agree' "$out/cuda_executor_test.log" |
            awk '{printf "| GPU vs CPU executor, allowed tokens + penalties + min_p | forced tokens asserted; seeded draws agree %s |\n", $3}'
          grep -h '^GPU_CHECK parity' "$out/cuda_executor_test.log" |
            awk '{printf "| GPU vs CPU executor | logits rel err %s (<= 2e-2), greedy agree %s |\n", $4, $6}'
          grep -h '^GPU_CHECK native_parity' "$out/cuda_executor_test.log" |
            awk '{printf "| GPU native weights (GGUF blocks, every type) vs CPU | logits rel err %s vs the fp32 path (<= 3e-2); greedy agree %s with CPU native, %s with fp32 |\n", $4, $6, $8}'
          grep -h '^GPU_CHECK native_weight_bytes' "$out/cuda_executor_test.log" |
            awk '{printf "| GPU native weight bytes | %s (16-bit: %s file blocks %s) |\n", $3, $6, $9}'
          grep -h '^GPU_CHECK sched_parity' "$out/cuda_scheduler_parity_test.log" |
            awk '{printf "| scheduler parity %s | tokens equal to the CPU %s, %s preemptions |\n", $3, $5, $7}')
        ;;
      bench)
        run_step gpu_bench 150 "$root/bin/gpu_bench"
        while read -r line; do rows+=("$line"); done < <(
          sed -n '/=== gpu_bench ===/,$p' "$out/gpu_bench.log" | grep '^|')
        ;;
      serve)
        serve_part "$root" "$out" "$model"
        ;;
      peer)
        peer_part "$root" "$out" "$model"
        ;;
      baseline)
        baseline_part "$out" "$model"
        ;;
      *) rows+=("| $part | FAILED: unknown part |"); failed=$((failed + 1)) ;;
    esac
  done
  table
  [ "$failed" -eq 0 ]
}

# make_model BIN DIR: writes the random bf16 model into DIR with BIN/convoy-mkmodel, unless DIR
# already holds one (the parts that need it may run alone or in any order).
make_model() {
  local bin=$1 model=$2
  [ -f "$model/config.json" ] ||
    run_step mkmodel 60 "$bin/convoy-mkmodel" --preset "${CONVOY_GPU_MODEL_PRESET:-llama-3.2-1b}" \
      --dtype bf16 --out "$model"
}

# convoyd on the GPU: a random Llama-3.2-1B made here, one request, a convoy-bench run of the
# comparison workload, then a drain: SIGTERM while a second bench run is in flight.
serve_part() {
  local root=$1 out=$2 model=$3 bin=$1/bin
  make_model "$bin" "$model" || return 1
  local limit
  limit=$(allowance 150)
  [ "$limit" -gt 30 ] || { rows+=("| convoyd | NOT RUN: the budget was spent |"); failed=$((failed + 1)); return 1; }
  local port=50151
  "$bin/convoyd" --config configs/throughput.pbtxt --model "$model" --port $port \
    --metrics-port 8102 --log-format json >"$out/convoyd.log" 2>&1 &
  local pid=$! start=$SECONDS ready=0
  while [ $((SECONDS - start)) -lt 90 ] && kill -0 "$pid" 2>/dev/null; do
    if "$bin/convoy" health --addr 127.0.0.1:$port >/dev/null 2>&1; then ready=1; break; fi
    sleep 1
  done
  if [ "$ready" -ne 1 ]; then
    rows+=("| convoyd | FAILED: not SERVING after $((SECONDS - start)) s (see convoyd.log: $(grep -m1 -iE 'error|fail' "$out/convoyd.log" | head -c 300)) |")
    failed=$((failed + 1))
    kill -9 "$pid" 2>/dev/null
    tail -n 20 "$out/convoyd.log"
    return 1
  fi
  rows+=("| convoyd | SERVING in $((SECONDS - start)) s, $(grep -o 'on the [a-z]* executor' "$out/convoyd.log" | head -n 1) |")
  "$bin/convoy" info --addr 127.0.0.1:$port >"$out/convoy-info.txt" 2>&1
  run_step generate 20 "$bin/convoy" generate --addr 127.0.0.1:$port --token-ids 1,2,3 \
    --max-tokens 16
  if run_step convoy_bench 90 "$bin/convoy-bench" run --addr 127.0.0.1:$port \
      --workload bench/workloads/gpu_compare.pbtxt --progress=false --json "$out/convoy-bench.json"; then
    local all
    all=$(awk -F'|' '$1 ~ /^all / || $1 ~ /^mixed / {print}' "$out/convoy_bench.log" | tail -n 1)
    local done_n fail_n tok_s
    done_n=$(awk '{print $2}' <<<"$all")
    fail_n=$(awk '{print $3}' <<<"$all")
    tok_s=$(awk -F'|' '{print $NF}' <<<"$all" | awk '{print $2}')
    echo "$tok_s" >"$out/convoy_tok_s.txt"
    rows+=("| convoyd + convoy-bench (256 req, 64 in flight) | done $done_n, failed $fail_n, $tok_s output tok/s |")
    [ "${fail_n:-1}" = "0" ] || failed=$((failed + 1))
  fi
  # Serving inter-token latency against the device's step (issue 23): 64 requests decoding at
  # once, each replaced when it ends; compare its p50 with gpu_bench's batch-64 decode step. The
  # server's own account of a step (convoy info's step_phase_means, over both runs) goes with it.
  if run_step steady_decode 40 "$bin/convoy-bench" run --addr 127.0.0.1:$port \
      --workload bench/workloads/steady_decode.pbtxt --concurrency 64 --duration-s 15 \
      --progress=false --json "$out/steady_decode.json"; then
    "$bin/convoy" info --addr 127.0.0.1:$port >"$out/convoy-info-after.txt" 2>&1
    local itl phases
    itl=$(python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print("%.3f / %.3f ms" % (d["classes"][-1]["itl_s"]["p50"] * 1e3, d["classes"][-1]["itl_s"]["p99"] * 1e3))' \
      "$out/steady_decode.json" 2>/dev/null)
    phases=$(python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))["server"].get("step_phase_means", {})
print("device wait %.0f us, engine thread %.0f us (plan %.0f, launch %.0f, apply %.0f)" % tuple(
    m.get(k, 0) for k in ("wait_us", "engine_thread_us", "plan_us", "launch_us", "apply_us")))' \
      "$out/convoy-info-after.txt" 2>/dev/null)
    rows+=("| convoyd ITL p50 / p99, 64 decoding (steady_decode) | ${itl:-unread}; per step: ${phases:-unread}; divide the p50 by gpu_bench's b=64 decode step |")
  fi
  # The drain: a run that lasts several seconds, SIGTERM one second in; admitted requests finish,
  # later ones are refused with UNAVAILABLE.
  "$bin/convoy-bench" run --addr 127.0.0.1:$port --workload bench/workloads/gpu_compare.pbtxt \
    --requests 1024 --warmup 0 --progress=false >"$out/drain_bench.log" 2>&1 &
  local bench_pid=$!
  sleep 1
  kill -TERM "$pid"
  local waited=0
  while kill -0 "$pid" 2>/dev/null && [ $waited -lt 45 ]; do sleep 1; waited=$((waited + 1)); done
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid"
    rows+=("| SIGTERM drain | FAILED: convoyd still running 45 s after SIGTERM |")
    failed=$((failed + 1))
  else
    wait "$pid"
    local rc=$?
    rows+=("| SIGTERM drain under load | convoyd exit $rc after ${waited} s, $(grep -o 'drained in [^;"]*' "$out/convoyd.log" | tail -n 1); the run: $(grep -E '^(all|mixed) ' "$out/drain_bench.log" | tail -n 1 | awk '{print "done " $2 ", refused or failed " $3}') |")
    [ "$rc" -eq 0 ] || failed=$((failed + 1))
  fi
  kill "$bench_pid" 2>/dev/null
  wait "$bench_pid" 2>/dev/null
}

# The compiled-PyTorch peer (issue 27): transformers with a static KV cache, its decode step under
# torch.compile (CUDA graphs), at batch 1 and 64 in gpu_bench's shape (128-token prompts, 3 warm-up
# and 48 timed steps); set beside gpu_bench's 1B decode rows when the bench part ran.
peer_part() {
  local root=$1 out=$2 model=$3
  make_model "$root/bin" "$model" || return 1
  # The script stops itself a little inside the step's cap, so that a slow compilation falls back
  # to eager (and says so) rather than being killed.
  local limit
  limit=$(allowance 150)
  run_step torch_peer 150 python3 bench/gpu/torch_peer.py --model "$model" --batches 1,64 \
    --time-limit-s $((limit > 20 ? limit - 10 : 10)) --json "$out/torch_peer.json"
  while read -r line; do rows+=("$line"); done < <(peer_rows "$out/torch_peer.log" "$out/gpu_bench.log")
}

# peer_rows PEER_LOG [GPU_BENCH_LOG]: the table rows from torch_peer's TORCH_PEER line and, when
# gpu_bench's log has its 1B decode rows, convoy's speed-up over the peer.
peer_rows() {
  local peer_log=$1 bench_log=${2:-}
  local line
  line=$(grep '^TORCH_PEER ' "$peer_log" 2>/dev/null | tail -n 1)
  [ -n "$line" ] || return 0
  local convoy=""
  if [ -n "$bench_log" ] && [ -f "$bench_log" ]; then
    convoy=$(sed -n '/=== gpu_bench ===/,$p' "$bench_log" |
      awk -F'|' '$2 ~ /^ 1B decode b=(1|64) $/ {split($2, k, "="); split($3, v, " "); printf "b%d=%s ", k[2], v[1]}')
  fi
  awk -v line="$line" -v convoy="$convoy" 'BEGIN {
    n = split(line, kv, " ")
    for (i = 2; i <= n; i++) { eq = index(kv[i], "="); p[substr(kv[i], 1, eq - 1)] = substr(kv[i], eq + 1) }
    m = split(convoy, kv, " ")
    for (i = 1; i <= m; i++) { eq = index(kv[i], "="); c[substr(kv[i], 1, eq - 1)] = substr(kv[i], eq + 1) }
    printf "| compiled PyTorch peer (%s) b=1 / b=64 | %s / %s tok/s (%s / %s ms/step) |\n", p["mode"],
      ("b1_tok_s" in p) ? p["b1_tok_s"] : "not run", ("b64_tok_s" in p) ? p["b64_tok_s"] : "not run",
      ("b1_ms" in p) ? p["b1_ms"] : "-", ("b64_ms" in p) ? p["b64_ms"] : "-"
    if (("b1" in c && "b1_tok_s" in p) || ("b64" in c && "b64_tok_s" in p)) {
      b1 = ("b1" in c && p["b1_tok_s"] > 0) ? sprintf("%.2fx", c["b1"] / p["b1_tok_s"]) : "unmeasured"
      b64 = ("b64" in c && p["b64_tok_s"] > 0) ? sprintf("%.2fx", c["b64"] / p["b64_tok_s"]) : "unmeasured"
      what = (p["mode"] ~ /eager/) ? "PyTorch peer, EAGER (its compilation fell back)" : "compiled PyTorch"
      printf "| convoy vs %s | b=1 %s (target >= 1.3x), b=64 %s (target >= 2x) |\n", what, b1, b64
    }
  }'
}

# transformers' generate on padded static batches of 64, same model, same length distributions.
baseline_part() {
  local out=$1 model=$2
  [ -f "$model/config.json" ] || { rows+=("| HF static baseline | NOT RUN: no model (the serve part makes it) |"); failed=$((failed + 1)); return 1; }
  run_step hf_baseline 120 python3 bench/gpu/hf_static_baseline.py --model "$model" \
    --requests 256 --batch-size 64 --time-limit-s 60 --json "$out/hf_baseline.json" || return 1
  local hf convoy
  hf=$(grep '^HF_BASELINE ' "$out/hf_baseline.log" | tail -n 1 | tr ' ' '\n' | awk -F= '$1=="useful_tok_s" {print $2}')
  convoy=$(cat "$out/convoy_tok_s.txt" 2>/dev/null)
  if [ -n "$hf" ] && [ -n "$convoy" ]; then
    rows+=("| convoyd vs transformers static batching | $convoy vs $hf useful output tok/s: $(awk -v a="$convoy" -v b="$hf" 'BEGIN {printf "%.1fx", a / b}') (target >= 20x) |")
  else
    rows+=("| HF static baseline | $(grep '^HF_BASELINE ' "$out/hf_baseline.log" | tail -n 1) |")
  fi
}

case "$mode" in
  build) build ;;
  device) device "$@" ;;
  *) echo "usage: $0 build | device [tests] [bench] [serve] [peer] [baseline]" >&2; exit 2 ;;
esac
