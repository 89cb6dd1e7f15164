# shellcheck shell=bash disable=SC2034  # sets variables for the scripts that source it
# Sourced by the scripts that measure a running convoyd (overload.sh, soak.sh, ...): the checks
# and the start-up they share. Bash; the caller has `set -euo pipefail` and runs from the
# repository's root.

# need_executables BUILD_DIR PATH...: exits 2 unless every PATH (inside BUILD_DIR) is executable.
need_executables() {
  local dir=$1 exe
  shift
  for exe in "$@"; do
    if [ ! -x "$exe" ]; then
      echo "$0: $exe is missing; build $(basename -a "$@" | tr '\n' ' ')in $dir" >&2
      exit 2
    fi
  done
}

# start_convoyd CONVOYD OUT_DIR CONFIG MODEL: starts convoyd on loopback with free ports (gRPC,
# HTTP; the metrics port off), its log in OUT_DIR/convoyd.log, and waits until it listens; on the
# CPUs in $SERVER_CPUS only (taskset) when that is set. Sets
# convoyd_pid, convoyd_addr (gRPC HOST:PORT) and convoyd_http (HTTP HOST:PORT); exits 1 if the
# server exits or writes no port files in 300 s (wait_ready).
start_convoyd() {
  local exe=$1 out=$2 config=$3 model=$4
  local pin=()
  [ -n "${SERVER_CPUS:-}" ] && pin=(taskset -c "$SERVER_CPUS")
  rm -f "$out/port" "$out/http-port"
  "${pin[@]}" "$exe" --config "$config" --model "$model" --listen-address 127.0.0.1 --port 0 \
    --port-file "$out/port" --http-listen-address 127.0.0.1 --http-port 0 \
    --http-port-file "$out/http-port" --metrics-port 0 >"$out/convoyd.log" 2>&1 &
  convoyd_pid=$!
  wait_ready "$convoyd_pid" convoyd "$out/convoyd.log" test -s "$out/port" -a -s "$out/http-port"
  convoyd_addr=127.0.0.1:$(cat "$out/port")
  convoyd_http=127.0.0.1:$(cat "$out/http-port")
}

# stop_convoyd: SIGTERM (a drain) to the convoyd that start_convoyd started, and waits for it.
stop_convoyd() {
  if [ -n "${convoyd_pid:-}" ] && kill -0 "$convoyd_pid" 2>/dev/null; then
    kill -TERM "$convoyd_pid"
    wait "$convoyd_pid" || true
  fi
}

# stop_process PID: SIGTERM to PID, SIGKILL if it still runs 30 s later, and waits for it (a
# child of the caller's shell). Nothing when it has already exited.
stop_process() {
  local pid=$1
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 60); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# wait_ready PID NAME LOG COMMAND...: waits until COMMAND succeeds (tried every 50 ms, for 300 s
# at most) while process PID (the server NAME, writing LOG) runs; exits 1 saying why and with the
# end of LOG when it exits first or the time runs out.
wait_ready() {
  local pid=$1 name=$2 log=$3
  shift 3
  for _ in $(seq 6000); do
    "$@" && return 0
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "$0: $name exited; the end of $log:" >&2
      tail -n 20 "$log" >&2
      exit 1
    fi
    sleep 0.05
  done
  echo "$0: $name not ready after 300 s; the end of $log:" >&2
  tail -n 20 "$log" >&2
  exit 1
}
