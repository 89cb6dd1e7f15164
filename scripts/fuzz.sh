#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, docs/fuzzing.md) in build-fuzz/ and runs each in turn over a
# scratch copy of its seed corpus (fuzz/corpus/<target>/ is only read), with its dictionary:
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
if ! command -v clang++ >/dev/null; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "fuzz: installing clang" >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends clang >/dev/null
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
for target in "${targets[@]}"; do
  dir=$work/$target
  rm -rf "$dir"
  mkdir -p "$dir/corpus"
  cp fuzz/corpus/"$target"/* "$dir/corpus/"
  dict=()
  [ -f fuzz/dict/"${target%_fuzzer}".dict ] && dict=(-dict=fuzz/dict/"${target%_fuzzer}".dict)
  set +e
  build-fuzz/fuzz/"$target" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$dir/" "${dict[@]}" "$dir/corpus" >"$dir/log" 2>&1
  rc=$?
  set -e
  # The last status line: "#N DONE cov: C ft: F corp: K/S ..." (or the last one before a crash).
  stats=$(grep -E '^#[0-9]+' "$dir/log" | tail -1 || true)
  if [ "$rc" -ne 0 ]; then
    tail -n 60 "$dir/log" >&2
    echo "fuzz: $target FAILED (exit $rc): $stats" >&2
    for artifact in "$dir"/crash-* "$dir"/timeout-* "$dir"/leak-* "$dir"/oom-*; do
      [ -e "$artifact" ] && echo "fuzz: reproduce with build-fuzz/fuzz/$target $artifact" >&2
    done
    exit 1
  fi
  echo "fuzz: $target ok: $stats" >&2
done
# Nothing to reproduce: the corpora and logs go (a directory named by CONVOY_FUZZ_WORK stays).
[ -n "${CONVOY_FUZZ_WORK:-}" ] || rm -rf "$work"
