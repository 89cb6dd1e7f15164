#!/usr/bin/env bash
# scripts/gpu-check.sh device, with fake binaries and fake system tools: its failure modes (no GPU,
# tests that would skip, a part that hangs, no cuBLAS) and the cuBLAS search. Each case checks the
# exit status and the table, which must always be printed.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
# Every path below is under $work: a failed mktemp must stop the test, not leave $work empty (with
# it empty, "rm -rf $work/tmp" once removed this machine's /tmp and gpu-check.sh's root /root).
scratch=${TEST_TMPDIR:-${TMPDIR:-/tmp}}
if ! mkdir -p "$scratch" || ! work=$(mktemp -d -p "$scratch") || [ ! -d "$work" ]; then
  echo "cannot make a scratch folder under $scratch" >&2
  exit 1
fi
trap 'rm -rf "${work:?}"' EXIT
failures=0

expect() {  # expect NAME CONDITION-DESCRIPTION COMMAND...
  local name=$1 what=$2
  shift 2
  if "$@"; then echo "ok: $name: $what"; else echo "FAILED: $name: $what"; failures=$((failures + 1)); fi
}

# A bundle whose test binaries fail unless CONVOY_REQUIRE_GPU=1 reaches them with a "GPU", and
# whose gpu_bench prints a table row; HANG_IN names a binary that never ends.
make_bundle() {
  local stage=$work/stage
  rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib"
  for b in kernels_test cuda_executor_test cuda_scheduler_parity_test; do
    cat >"$stage/bin/$b" <<'FAKE'
#!/usr/bin/env bash
[ "${HANG_IN:-}" = "$(basename "$0")" ] && exec sleep 1000
if [ "${FAKE_GPU:-0}" != 1 ]; then
  [ "${CONVOY_REQUIRE_GPU:-}" = 1 ] && { echo "[  FAILED  ] Fake.Test"; echo "[==========] 1 test"; exit 1; }
  echo "[  SKIPPED ] Fake.Test"; echo "[==========] 1 test"; exit 0
fi
echo "[       OK ] Fake.Test"; echo "[==========] 1 test"; exit 0
FAKE
  done
  cat >"$stage/bin/gpu_bench" <<'FAKE'
#!/usr/bin/env bash
echo "| 1B decode b=1 | 1 tok/s, 1.000 ms/step |"  # progress lines: the table after the mark counts
echo "=== gpu_bench ==="
echo "| fake row | 1 |"
echo "| 1B decode b=1 | 1000 tok/s, 1.000 ms/step, 2000 GB/s = 50% of copy bw (target >=45%) |"
echo "| 1B decode b=64 | 48000 tok/s, 1.333 ms/step |"
FAKE
  cat >"$stage/bin/convoy-mkmodel" <<'FAKE'
#!/usr/bin/env bash
while [ $# -gt 0 ]; do [ "$1" = --out ] && { mkdir -p "$2" && echo '{}' >"$2/config.json"; }; shift; done
FAKE
  chmod +x "$stage"/bin/*
  tar -C "$stage" -cJf "$work/bundle.tar.xz" bin lib
}

# Fake system tools first on PATH: nvidia-smi (works when FAKE_GPU=1) and an ldconfig that knows
# no cuBLAS.
mkdir -p "$work/path" "$work/wheel/nvidia/cublas/lib" "$work/out"
cat >"$work/path/nvidia-smi" <<'FAKE'
#!/usr/bin/env bash
[ "${FAKE_GPU:-0}" = 1 ] || { echo "NVIDIA-SMI has failed: no driver" >&2; exit 9; }
echo "name, driver_version"; echo "Fake H200, 1.0"
FAKE
printf '#!/usr/bin/env bash\nexit 0\n' >"$work/path/ldconfig"
# python3 as the peer part calls it: records its arguments, prints torch_peer's last line.
cat >"$work/path/python3" <<'FAKE'
#!/usr/bin/env bash
echo "$*" >"$FAKE_PYTHON_ARGS"
echo "TORCH_PEER device=cuda b1_mode=reduce-overhead b1_tok_s=500.0 b1_ms=2.0 b64_mode=reduce-overhead b64_tok_s=16000.0 b64_ms=4.0 mode=reduce-overhead compile_s=40.0 not_run=none"
FAKE
export FAKE_PYTHON_ARGS=$work/python-args
chmod +x "$work/path"/*
touch "$work/wheel/nvidia/cublas/lib/libcublas.so.13"
make_bundle

check() {  # check NAME PARTS...; leaves the output in $work/log and the status in $rc
  local name=$1
  shift
  rm -rf "${work:?}/out" "${work:?}/tmp" && mkdir -p "$work/out" "$work/tmp"
  (cd "$repo" && PATH="$work/path:$PATH" OUT="$work/out" TMPDIR="$work/tmp" \
    CONVOY_GPU_BUNDLE="$work/bundle.tar.xz" \
    CONVOY_GPU_ROOT="$work/root" CONVOY_CUDA_HOME="$work/no-cuda" \
    CONVOY_CUBLAS_SEARCH_ROOT="$work/wheel" scripts/gpu-check.sh device "$@") >"$work/log" 2>&1
  rc=$?
  echo "--- $name: exit $rc"
  # Its scratch logs are in the archive, and nothing else is left behind, however it ended.
  expect "$name" "leaves no scratch files" test -z "$(ls -A "$work/tmp")"
  expect "$name" "archives its logs" test -s "$work/out/gpu-check-logs.tgz"
}

# No usable GPU: a loud failure, not a table of skips.
FAKE_GPU=0 check no-gpu tests
expect no-gpu "exits non-zero" test "$rc" -ne 0
expect no-gpu "says so loudly" grep -q "GPU CHECK FAILED: nvidia-smi finds no usable GPU" "$work/log"

# A GPU that the tests do not see: with CONVOY_REQUIRE_GPU=1 their skips are failures.
export FAKE_GPU=0
cat >"$work/path/nvidia-smi" <<'FAKE'
#!/usr/bin/env bash
echo "name, driver_version"; echo "Fake H200, 1.0"
FAKE
check skips tests
expect skips "exits non-zero" test "$rc" -ne 0
expect skips "marks the tests failed" grep -q "| kernels_test | FAILED: exit 1" "$work/log"
expect skips "prints the table" grep -q "GPU CHECK FAILED (3 failures)" "$work/log"

# Everything passes: exit 0, cuBLAS found in the wheel folder by the fallback search.
export FAKE_GPU=1
check pass tests bench
expect pass "exits 0" test "$rc" -eq 0
expect pass "finds the wheel's cuBLAS" grep -q "cuBLAS: $work/wheel/nvidia/cublas/lib" "$work/log"
expect pass "carries the bench rows" grep -q "| fake row | 1 |" "$work/log"
expect pass "says passed" grep -q "GPU CHECK PASSED" "$work/log"

# The peer part alone makes the model, gives torch_peer a time limit inside its cap, and with bench
# before it sets convoy's 1B decode beside the peer's.
rm -rf "${work:?}/model"
CONVOY_GPU_MODEL_DIR="$work/model" check peer bench peer
expect peer "exits 0" test "$rc" -eq 0
expect peer "makes the model" test -f "$work/model/config.json"
expect peer "limits torch_peer's time" grep -Eq -- "--model $work/model --batches 1,64 --time-limit-s 1[0-4][0-9] " "$work/python-args"
expect peer "prints the peer's row" grep -q "| compiled PyTorch peer (reduce-overhead) b=1 / b=64 | 500.0 / 16000.0 tok/s (2.0 / 4.0 ms/step) |" "$work/log"
expect peer "prints convoy's speed-up" grep -q "| convoy vs compiled PyTorch | b=1 2.00x (target >= 1.3x), b=64 3.00x (target >= 2x) |" "$work/log"

# A hanging part is cut at the budget; later parts are reported as not run; the table comes last.
HANG_IN=kernels_test CONVOY_GPU_BUDGET_S=25 check hang tests bench
expect hang "exits non-zero" test "$rc" -ne 0
expect hang "cuts the hanging part" grep -Eq "\| kernels_test \| TIMED OUT after [0-9]+ s" "$work/log"
expect hang "skips what the budget cannot hold" grep -q "NOT RUN: the budget was spent" "$work/log"
expect hang "ends with the verdict" bash -c "tail -n 1 '$work/log' | grep -q 'GPU CHECK FAILED'"

# No cuBLAS anywhere: a loud failure naming it.
rm "$work/wheel/nvidia/cublas/lib/libcublas.so.13"
check no-cublas tests
expect no-cublas "exits non-zero" test "$rc" -ne 0
expect no-cublas "names cuBLAS" grep -q "GPU CHECK FAILED: libcublas.so.13 not found" "$work/log"

if [ "$failures" -ne 0 ]; then
  echo "$failures checks failed; the last log:"
  cat "$work/log"
  exit 1
fi
echo "all checks passed"
