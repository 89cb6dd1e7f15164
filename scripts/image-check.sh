#!/usr/bin/env bash
# Builds convoy's CPU image from docker/Dockerfile, unchanged, with buildah, from a clean clone of
# the committed HEAD, over a debian:12 image made here from a debootstrap root; then runs it as an
# operator would and checks it: convoyd becomes SERVING, answers token-id and text prompts over
# gRPC, answers /health, /ready and a chat completion over HTTP (with the host's python3 in the
# container's network namespace: the image has neither curl nor python3), serves /metrics,
# listens on every interface (the image's config opts in; convoyd's default is loopback), passes the image's own HEALTHCHECK,
# runs as the image's non-root user, the image holds no compiler and no -dev package; SIGTERM
# drains it and it exits 0. Prints the image's size and how long each part took.
#
#   scripts/image-check.sh              # the committed HEAD
#   scripts/image-check.sh --worktree   # the working tree's files as git sees them (tracked and
#                                       # untracked, not ignored): check before committing
#
# Needs root: buildah runs with --isolation chroot and --storage-driver vfs (no Docker engine, no
# registry), and convoyd runs in a network namespace of its own, so that the image's default
# ports and HEALTHCHECK are checked as written without clashing with anything on this machine.
# buildah, debootstrap and iproute2 are installed through apt-get when missing.
#
# Cache: CONVOY_IMAGE_CACHE (default /var/tmp/convoy-image-check) holds buildah's storage: the
# debian:12 base (a pristine minimal bookworm: the root cached by scripts/fresh-root.sh when it is
# there, else a new debootstrap) and the build's layers, so a second run with the same sources
# reuses every layer. Each run removes the layers of earlier builds that it did not use (see
# prune_stale_images); all of it is cleared when it grows past CONVOY_IMAGE_CACHE_MAX_GB (20).
# The registries are reached as scripts/fresh-root.sh does: this machine's apt mirror, and the
# certificate bundle the environment names, handed to the build as a secret (never in the image).
#
# Exit status: 0 PASSED; 1 FAILED; 3 could not try here (not root, tools not installable).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
cache=${CONVOY_IMAGE_CACHE:-/var/tmp/convoy-image-check}
cache_max_gb=${CONVOY_IMAGE_CACHE_MAX_GB:-20}
fresh_root=${CONVOY_FRESH_CACHE:-/var/tmp/convoy-fresh-root}/bookworm
image=localhost/convoy:image-check
base_image=docker.io/library/debian:12
source_mode="head"
case "${1:-}" in
  "") ;;
  --worktree) source_mode=worktree ;;
  *) echo "usage: $0 [--worktree]" >&2; exit 2 ;;
esac

say() { echo "image-check: $*" >&2; }
fail() {
  echo "image-check: FAILED: $*" >&2
  exit 1
}
cannot() {
  echo "image-check: cannot check the image here: $*" >&2
  exit 3
}
total_start=$SECONDS
times=()
lap() {  # lap NAME START: records how long a part took
  times+=("$(printf '%-28s %5d s' "$1" $((SECONDS - $2)))")
}

[ "$(id -u)" -eq 0 ] || cannot "needs root (buildah with chroot isolation, a network namespace)"
git rev-parse --verify -q HEAD >/dev/null || cannot "no commit to clone in $repo"

missing=()
for tool in buildah:buildah debootstrap:debootstrap ip:iproute2 python3:python3 flock:util-linux; do
  command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -qq "${missing[@]}" || { apt-get update -qq && apt-get install -y -qq "${missing[@]}"; }; } \
    >/dev/null 2>&1 || cannot "could not install ${missing[*]} with apt-get"
fi

mkdir -p "$cache"
exec 9>"$cache/lock"
flock -n 9 || { say "waiting for another image-check to finish"; flock 9; }

buildah=(buildah --root "$cache/storage" --runroot "$cache/run" --storage-driver vfs)
if [ -d "$cache/storage" ]; then
  used_gb=$(du -s --block-size=1G "$cache/storage" | cut -f1)
  if [ "$used_gb" -gt "$cache_max_gb" ]; then
    say "the cache holds ${used_gb} GiB (more than $cache_max_gb): clearing it"
    "${buildah[@]}" rm --all >/dev/null 2>&1 || true
    "${buildah[@]}" rmi --all --force >/dev/null 2>&1 || true
  fi
fi
# Images that the build just made did not use: earlier builds' layers for other sources. With the
# vfs driver each layer is a whole copy of its root (about 3.5 GiB a build), so they go at once.
# The base image, the layers this build used or made (among them the dependency layers that the
# next build reuses) and the tagged image stay; the kept intermediate layers are tagged
# (convoy-image-check-layer:ID) because removing an image also removes its untagged parents.
prune_stale_images() {
  local keep id tag k before stale=()
  mapfile -t keep < <(grep -oE '^--> [0-9a-f]{11,}|Using cache [0-9a-f]{11,}' "$log" | awk '{print $NF}')
  keep+=("$("${buildah[@]}" images --noheading --format '{{.ID}}' "$base_image" 2>/dev/null || true)")
  keep+=("$("${buildah[@]}" images --noheading --format '{{.ID}}' "$image" 2>/dev/null || true)")
  before=$("${buildah[@]}" images --all --noheading --format '{{.ID}}' | sort -u | wc -l)
  # Newest first, so that a layer's children go before it.
  while read -r id tag; do
    for k in "${keep[@]}"; do
      [ -n "$k" ] || continue
      if [[ $k == "$id"* || $id == "$k"* ]]; then
        if [[ $tag == *"<none>"* ]]; then
          "${buildah[@]}" tag "$id" "localhost/convoy-image-check-layer:$id" >/dev/null 2>&1 || true
        fi
        continue 2
      fi
    done
    stale+=("$id")
  done < <("${buildah[@]}" images --all --noheading --format '{{.ID}} {{.Name}}:{{.Tag}}')
  for id in "${stale[@]}"; do
    "${buildah[@]}" rmi --force "$id" >/dev/null 2>&1 || true  # gone already with a child
  done
  say "removed $((before - $("${buildah[@]}" images --all --noheading --format '{{.ID}}' | sort -u | wc -l)))" \
    "stale images; the cache holds $(du -sh "$cache/storage" | cut -f1)," \
    "$(df -h --output=avail "$cache" | tail -1 | tr -d ' ') free on its disk"
}

# Working containers left by an interrupted run (this storage is image-check's alone, and locked).
"${buildah[@]}" rm --all >/dev/null 2>&1 || true

# ---- debian:12, made here: a pristine minimal bookworm root, committed as an image ----
part_start=$SECONDS
if ! "${buildah[@]}" inspect --type image "$base_image" >/dev/null 2>&1; then
  # This machine's Debian mirrors (deb822 or one-line sources), as scripts/fresh-root.sh finds them.
  mirror=$(awk '/^URIs:/ && $2 ~ /debian/ && $2 !~ /security/ {print $2; exit}' \
    /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [ -n "$mirror" ] ||
    mirror=$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
  security=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
    grep -o 'http[^ ]*debian-security' | head -1 || true)
  [ -n "$security" ] || security=http://deb.debian.org/debian-security

  ctr=$("${buildah[@]}" from --name convoy-image-check-base scratch)
  root=$("${buildah[@]}" mount "$ctr")
  case "$root" in /*/*) ;; *) cannot "buildah mount gave no container root ('$root')" ;; esac
  if [ -f "$fresh_root/.convoy-complete" ]; then
    say "making $base_image from scripts/fresh-root.sh's debootstrap root ($fresh_root)"
    cp -a "$fresh_root/." "$root/"
    rm -f "$root/.convoy-complete"
  else
    say "making $base_image: debootstrap --variant=minbase bookworm from $mirror (once, ~2 minutes)"
    debootstrap --variant=minbase bookworm "$root" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
      cannot "debootstrap from $mirror failed (see $cache/debootstrap.log)"
  fi
  # What Debian's own debian:12 image has: no package cache, no lists, deb822 sources with the
  # updates and security suites; no trace of this machine's name or resolver.
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root/etc/apt/sources.list"
  cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  : >"$root/etc/resolv.conf"
  echo localhost >"$root/etc/hostname"
  "${buildah[@]}" umount "$ctr" >/dev/null
  "${buildah[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd bash "$ctr"
  "${buildah[@]}" commit --rm --format docker --quiet "$ctr" "$base_image" >/dev/null
fi
lap "debian:12 base image" "$part_start"

# ---- the sources: a clean clone, or the working tree's files ----
work=$(mktemp -d "${TMPDIR:-/tmp}/convoy-image-check.XXXXXX")
ns=convoy-image-check-$$
runner=""
daemon=""
ctr=""
cleanup() {
  if [ -n "$daemon" ] && kill -0 "$daemon" 2>/dev/null; then kill -KILL "$daemon" 2>/dev/null || true; fi
  if [ -n "$runner" ]; then wait "$runner" 2>/dev/null || true; fi
  if [ -n "$ctr" ]; then "${buildah[@]}" rm "$ctr" >/dev/null 2>&1 || true; fi
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
src=$work/src
if [ "$source_mode" = head ]; then
  git clone -q "$repo" "$src" || fail "git clone of $repo failed"
  say "sources: $(git -C "$src" log -1 --format='%h %s' | cut -c1-90)"
else
  mkdir -p "$src"
  git ls-files -z -c -o --exclude-standard --deduplicate |
    while IFS= read -r -d '' f; do if [ -e "$f" ]; then printf '%s\0' "$f"; fi; done |
    tar --null -T - -cf - | tar -xf - -C "$src"
  say "sources: the working tree of $repo (uncommitted changes included)"
fi

# ---- the build ----
part_start=$SECONDS
build_args=()
for var in PIP_CERT REQUESTS_CA_BUNDLE SSL_CERT_FILE; do
  file=${!var:-}
  if [ -n "$file" ] && [ -s "$file" ]; then
    build_args+=(--secret "id=ca-bundle,src=$file")
    break
  fi
done
if [ -n "${PIP_INDEX_URL:-}" ]; then build_args+=(--build-arg "PIP_INDEX_URL=$PIP_INDEX_URL"); fi
# The build compiles through this machine's compiler cache, mounted into the build stage (the
# image's layers never hold it): a rebuild after a small change takes minutes less. The build's
# compiler comes from the same Debian packages as this machine's, so ccache takes objects made by
# earlier image builds (the image's flags differ from the tests' build: no -march=native).
# CONVOY_IMAGE_CCACHE=0 builds without it.
if [ "${CONVOY_IMAGE_CCACHE:-1}" != 0 ] && ccache_dir=$(ccache -k cache_dir 2>/dev/null); then
  mkdir -p "$ccache_dir"
  build_args+=(--volume "$ccache_dir:/var/cache/convoy-ccache"
    --build-arg CONVOY_CCACHE_DIR=/var/cache/convoy-ccache)
  say "compiler cache: $ccache_dir"
fi
log=$cache/build.log
say "building $image from docker/Dockerfile (log: $log)"
set +e
"${buildah[@]}" bud --isolation chroot --format docker --layers --pull=never \
  -f "$src/docker/Dockerfile" -t "$image" "${build_args[@]}" "$src" 2>&1 |
  tee "$log" | { grep --line-buffered -E '^(\[[0-9]+/[0-9]+\] )?STEP [0-9]+/' >&2; true; }
rc=${PIPESTATUS[0]}
set -e
prune_stale_images
if [ "$rc" -ne 0 ]; then
  tail -40 "$log" >&2
  fail "the image build exited $rc (the end of its log is above; all of it in $log)"
fi
lap "image build" "$part_start"

# ---- the image's config ----
part_start=$SECONDS
"${buildah[@]}" inspect --type image "$image" >"$work/image.json"
python3 - "$work/image.json" "$work" <<'EOF' || fail "the image's config is not what it should be (above)"
import json, os, sys
config = json.load(open(sys.argv[1]))["Docker"]["config"]
work = sys.argv[2]
errors = []
user = config.get("User") or ""
uid = user.split(":")[0]
if not uid or uid in ("0", "root"):
    errors.append(f"the image's User is {user!r}: it must name a non-root user")
for port in ("50051/tcp", "8000/tcp", "8002/tcp"):
    if port not in (config.get("ExposedPorts") or {}):
        errors.append(f"the image does not EXPOSE {port}")
test = (config.get("Healthcheck") or {}).get("Test") or []
if not test or test[0] not in ("CMD", "CMD-SHELL"):
    errors.append(f"the image has no HEALTHCHECK command (Healthcheck.Test is {test!r})")
elif test[0] == "CMD-SHELL":
    test = ["CMD", "/bin/sh", "-c", test[1]]
entrypoint = (config.get("Entrypoint") or []) + (config.get("Cmd") or [])
if not entrypoint or os.path.basename(entrypoint[0]) != "convoyd":
    errors.append(f"the image's entrypoint {entrypoint!r} does not start convoyd")
for e in errors:
    print("image-check:", e, file=sys.stderr)
with open(f"{work}/entrypoint", "w") as f:
    f.write("\0".join(entrypoint))
with open(f"{work}/healthcheck", "w") as f:
    f.write("\0".join(test[1:]))
with open(f"{work}/user", "w") as f:
    f.write(uid)
with open(f"{work}/path", "w") as f:
    env = dict(e.split("=", 1) for e in config.get("Env") or [] if "=" in e)
    f.write(env.get("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"))
sys.exit(1 if errors else 0)
EOF
mapfile -d '' entrypoint <"$work/entrypoint"
mapfile -d '' healthcheck <"$work/healthcheck"
image_uid=$(cat "$work/user")
say "ok: image config: user $image_uid, ports 50051 8000 8002, entrypoint '${entrypoint[*]}'"

ctr=$("${buildah[@]}" from --name "convoy-image-check-$$" --pull=never "$image")
root=$("${buildah[@]}" mount "$ctr")
case "$root" in /*/*) ;; *) cannot "buildah mount gave no container root ('$root')" ;; esac
compilers=()
IFS=: read -r -a path_dirs <"$work/path" || true  # no newline at its end
for dir in "${path_dirs[@]}" /usr/bin /usr/local/cuda/bin; do
  for c in gcc g++ cc c++ nvcc clang clang++ c89 c99; do
    if [ -e "$root$dir/$c" ] || [ -L "$root$dir/$c" ]; then compilers+=("$dir/$c"); fi
  done
done
[ ${#compilers[@]} -eq 0 ] || fail "the image holds compilers: ${compilers[*]}"
# shellcheck disable=SC2016 # dpkg-query's format, not the shell's
dev_packages=$(chroot "$root" dpkg-query -W -f '${Package}\n' | grep -E -- '-dev(:|$)' || true)
[ -z "$dev_packages" ] || fail "the image holds -dev packages: $(tr '\n' ' ' <<<"$dev_packages")"
headers=$(find "$root/usr/include" "$root/usr/local/include" -type f 2>/dev/null | wc -l)
[ "$headers" -eq 0 ] || fail "the image holds $headers header files under /usr/include or /usr/local/include"
"${buildah[@]}" umount "$ctr" >/dev/null
say "ok: no compiler on PATH or in /usr/bin, no -dev package, no headers"
size=$("${buildah[@]}" images --json "$image" | python3 -c \
  'import json, sys; print(json.load(sys.stdin)[0]["size"])')
say "image size: $size"

# ---- convoyd in the image, in a network namespace of its own ----
ip netns add "$ns" || cannot "could not make a network namespace (ip netns add)"
ip netns exec "$ns" ip link set lo up
in_image() {  # in_image COMMAND...: runs COMMAND in the container, as the image's user
  ip netns exec "$ns" "${buildah[@]}" run --isolation chroot "$ctr" -- "$@"
}
inside_uid=$(in_image id -u)
if [ "$inside_uid" != "$image_uid" ] || [ "$inside_uid" = 0 ]; then
  fail "a command in the container runs as uid $inside_uid, not the image's non-root user $image_uid"
fi

in_image "${entrypoint[@]}" >"$work/convoyd.log" 2>&1 &
runner=$!
# convoyd's own process, below buildah's: the one that SIGTERM must reach.
find_daemon() {
  python3 - "$runner" <<'EOF'
import os, sys
children = {}
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        continue
    name = stat[stat.index("(") + 1:stat.rindex(")")]
    ppid = int(stat[stat.rindex(")") + 2:].split()[1])
    children.setdefault(ppid, []).append((int(pid), name))
todo = [int(sys.argv[1])]
while todo:
    for pid, name in children.get(todo.pop(), []):
        if name == "convoyd":
            print(pid)
            sys.exit(0)
        todo.append(pid)
sys.exit(1)
EOF
}
started=$SECONDS
serving=0
while [ $((SECONDS - started)) -lt 300 ]; do
  kill -0 "$runner" 2>/dev/null || { cat "$work/convoyd.log" >&2; fail "convoyd exited before it served (its log is above)"; }
  [ -n "$daemon" ] || daemon=$(find_daemon || true)
  if [ -n "$daemon" ] && in_image convoy health --addr 127.0.0.1:50051 >/dev/null 2>&1; then
    serving=1
    break
  fi
  sleep 1
done
[ "$serving" -eq 1 ] || { cat "$work/convoyd.log" >&2; fail "convoyd was not SERVING after 300 s"; }
say "ok: convoyd SERVING after $((SECONDS - started)) s"
daemon_uid=$(awk '/^Uid:/ {print $2}' "/proc/$daemon/status")
[ "$daemon_uid" = "$image_uid" ] || fail "convoyd runs as uid $daemon_uid, not the image's user $image_uid"
say "ok: convoyd (pid $daemon) runs as uid $daemon_uid"

check_answer() {  # check_answer WHAT JSON: the response has 1..8 tokens (exactly 8 without a stop)
  python3 - "$1" "$2" <<'EOF'
import json, sys
what, response = sys.argv[1], json.loads(sys.argv[2])
n = len(response.get("token_ids", []))
reason = response.get("finish_reason")
if not (n == 8 or (1 <= n < 8 and reason == "stop")):
    sys.exit(f"image-check: the answer to {what} has {n} tokens (finish reason {reason}): {response}")
text = response.get("text", "")
print(f"image-check: ok: {what}: {n} tokens, {reason}, text {text!r}", file=sys.stderr)
EOF
}
answer=$(in_image convoy generate --addr 127.0.0.1:50051 --token-ids 1,15,27,300,42 --max-tokens 8 --json) ||
  fail "convoy generate --token-ids failed"
check_answer "--token-ids" "$answer" || fail "the answer to --token-ids is wrong"
prompt=$'<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n'
answer=$(in_image convoy generate --addr 127.0.0.1:50051 --prompt "$prompt" --max-tokens 8 --json) ||
  fail "convoy generate --prompt failed"
check_answer "--prompt" "$answer" || fail "the answer to --prompt is wrong"

ip netns exec "$ns" python3 - <<'EOF' || fail "convoyd's sockets or /metrics are not what they should be (above)"
import sys, urllib.request
errors = []
# Listening on every interface, as the image's config says, not only on loopback: 0.0.0.0, or
# the IPv6 wildcard (gRPC binds 0.0.0.0 as a dual-stack [::] socket, which takes IPv4 too).
listening = set()
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    for line in open(table).readlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, port = local.split(":")
        if state == "0A":  # LISTEN
            wildcard = set(address) == {"0"}
            listening.add(("*" if wildcard else address, int(port, 16)))
for port in (50051, 8000, 8002):
    if ("*", port) not in listening:
        errors.append(f"nothing listens on every interface at port {port} "
                      f"(listening: {sorted(listening)})")
try:
    text = urllib.request.urlopen("http://127.0.0.1:8002/metrics", timeout=10).read().decode()
except OSError as e:
    errors.append(f"GET http://127.0.0.1:8002/metrics failed: {e}")
    text = ""
values = {}
for line in text.splitlines():
    if line and not line.startswith("#"):
        name, _, value = line.rpartition(" ")
        values[name] = float(value)
if "convoy_num_requests_waiting" not in values:
    errors.append("/metrics has no convoy_num_requests_waiting")
if values.get("convoy_nv_inference_request_success", 0) < 2:
    errors.append("/metrics counts fewer than the 2 requests answered: convoy_nv_inference_request_success = "
                  f"{values.get('convoy_nv_inference_request_success')}")
# The HTTP port: liveness, readiness and the OpenAI API. The runtime image has neither curl nor
# python3 (it holds convoy's programs and the libraries they load), so this client is the host's
# python3, in the container's network namespace.
import json
for path in ("/health", "/ready"):
    try:
        status = urllib.request.urlopen(f"http://127.0.0.1:8000{path}", timeout=10).status
        if status != 200:
            errors.append(f"GET http://127.0.0.1:8000{path} answered {status}, not 200")
    except OSError as e:
        errors.append(f"GET http://127.0.0.1:8000{path} failed: {e}")
chat = json.dumps({"messages": [{"role": "user", "content": "What is the capital of France?"}],
                   "max_tokens": 8, "temperature": 0}).encode()
try:
    request = urllib.request.Request("http://127.0.0.1:8000/v1/chat/completions", data=chat,
                                     headers={"Content-Type": "application/json"})
    answer = json.loads(urllib.request.urlopen(request, timeout=120).read())
    choice = answer["choices"][0]
    if not choice["message"]["content"] or answer["usage"]["completion_tokens"] < 1:
        errors.append(f"POST /v1/chat/completions answered no text: {answer}")
except (OSError, KeyError, IndexError, ValueError) as e:
    errors.append(f"POST http://127.0.0.1:8000/v1/chat/completions failed: {e}")
for e in errors:
    print("image-check:", e, file=sys.stderr)
if not errors:
    print("image-check: ok: listening on every interface at 50051, 8000 and 8002; HTTP /health, "
          f"/ready and /v1/chat/completions answer; /metrics has {len(values)} series",
          file=sys.stderr)
sys.exit(1 if errors else 0)
EOF

in_image "${healthcheck[@]}" >/dev/null 2>&1 ||
  fail "the image's HEALTHCHECK command '${healthcheck[*]}' failed on a SERVING convoyd"
say "ok: the image's HEALTHCHECK '${healthcheck[*]}' passes"

stop_start=$SECONDS
kill -TERM "$daemon"
while kill -0 "$runner" 2>/dev/null && [ $((SECONDS - stop_start)) -lt 60 ]; do sleep 0.2; done
kill -0 "$runner" 2>/dev/null && fail "convoyd did not exit within 60 s of SIGTERM"
set +e
wait "$runner"
rc=$?
set -e
runner=""
[ "$rc" -eq 0 ] || { tail -20 "$work/convoyd.log" >&2; fail "convoyd exited $rc after SIGTERM, not 0 (its log's end is above)"; }
say "ok: SIGTERM: convoyd drained and exited 0 in $((SECONDS - stop_start)) s"
lap "run and checks" "$part_start"

"${buildah[@]}" rm "$ctr" >/dev/null
ctr=""
printf '%s\n' "${times[@]}" >&2
say "PASSED: image $image, $size, checked in $((SECONDS - total_start)) s"
