#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, docs/fuzzing.md) in build-fuzz/ and runs each over a scratch
# copy of its seed corpus (fuzz/corpus/<target>/ is only read), with its dictionary, as many at a
# time as CONVOY_FUZZ_JOBS says (default: the cores; each target is one process on one core):
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]    default: 60 s each, every target
# Fails at the first crash, sanitizer report, timeout (10 s on one input), leak or out-of-memory
# (2 GiB) and prints the reproducer's path; rerun one with build-fuzz/fuzz/<target> <path>.
# CONVOY_FUZZ_WORK names the scratch folder, kept after the run; the default, a new one under /tmp,
# is kept only when a target fails (its reproducer is there).
# Installs clang when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
all=(server_config_fuzzer chat_template_fuzzer tokenizer_json_fuzzer tokenizer_fuzzer
  safetensors_fuzzer gguf_fuzzer request_validation_fuzzer openai_request_fuzzer grammar_fuzzer)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -eq 0 ]; then
  echo "usage: $0 [SECONDS_PER_TARGET] [TARGET...]; targets: ${all[*]}" >&2
  exit 2
fi
for target in "${targets[@]}"; do
  if [[ " ${all[*]} " != *" $target "* ]]; then
    echo "fuzz: unknown target '$target'; targets: ${all[*]}" >&2
    exit 2
  fi
done

scripts/setup.sh
# As scripts/sanitize.sh installs it.
if ! command -v clang++ >/dev/null || ! dpkg -s libomp-dev >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "fuzz: installing clang and libomp-dev" >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    clang libomp-dev >/dev/null
fi
jobs=${CONVOY_BUILD_JOBS:-$(nproc)}
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCONVOY_ENABLE_CUDA=OFF -DCONVOY_BUILD_BENCHMARKS=OFF -DCONVOY_BUILD_TESTS=OFF \
  -DCONVOY_FUZZ=ON >/dev/null
cmake --build build-fuzz -j "$jobs" --target "${targets[@]}"

work=${CONVOY_FUZZ_WORK:-$(mktemp -d /tmp/convoy-fuzz.XXXXXX)}
echo "fuzz: $seconds s per target; corpora, logs and reproducers under $work" >&2
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fuzz_jobs=${CONVOY_FUZZ_JOBS:-$(nproc)}
# fuzz_one TARGET: one target's run; its exit status is the fuzzer's.
fuzz_one() {
  local target=$1 dir=$work/$1 dict=()
  rm -rf "$dir"
  mkdir -p "$dir/corpus"
  cp fuzz/corpus/"$target"/* "$dir/corpus/"
  [ -f fuzz/dict/"${target%_fuzzer}".dict ] && dict=(-dict=fuzz/dict/"${target%_fuzzer}".dict)
  exec build-fuzz/fuzz/"$target" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$dir/" "${dict[@]}" "$dir/corpus" >"$dir/log" 2>&1
}
# report TARGET RC: says how TARGET's run ended; on a failure prints its log's tail and how to
# reproduce, and stops every other run still going.
report() {
  local target=$1 rc=$2 dir=$work/$1 stats artifact
  # The last status line: "#N DONE cov: C ft: F corp: K/S ..." (or the last one before a crash).
  stats=$(grep -E '^#[0-9]+' "$dir/log" | tail -1 || true)
  if [ "$rc" -eq 0 ]; then
    echo "fuzz: $target ok: $stats" >&2
    return 0
  fi
  [ ${#running[@]} -gt 0 ] && kill "${!running[@]}" 2>/dev/null
  wait
  tail -n 60 "$dir/log" >&2
  echo "fuzz: $target FAILED (exit $rc): $stats" >&2
  for artifact in "$dir"/crash-* "$dir"/timeout-* "$dir"/leak-* "$dir"/oom-*; do
    [ -e "$artifact" ] && echo "fuzz: reproduce with build-fuzz/fuzz/$target $artifact" >&2
  done
  exit 1
}
declare -A running=()  # pid -> target
# wait_one: waits for one run to end and reports it.
wait_one() {
  local pid rc=0
  wait -n -p pid "${!running[@]}" || rc=$?
  local target=${running[$pid]}
  unset "running[$pid]"
  report "$target" "$rc"
}
for target in "${targets[@]}"; do
  [ ${#running[@]} -ge "$fuzz_jobs" ] && wait_one
  fuzz_one "$target" &
  running[$!]=$target
done
while [ ${#running[@]} -gt 0 ]; do wait_one; done
# Nothing to reproduce: the corpora and logs go (a directory named by CONVOY_FUZZ_WORK stays).
[ -n "${CONVOY_FUZZ_WORK:-}" ] || rm -rf "$work"
