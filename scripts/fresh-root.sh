#!/usr/bin/env bash
# Runs a command on a brand-new Debian 12 over a clean clone of the committed HEAD: what a new user
# gets from the README's commands, with nothing installed on this machine leaking in.
#
#   scripts/fresh-root.sh                      # scripts/test.sh
#   scripts/fresh-root.sh scripts/check-run.sh
#
# The root is a debootstrap'd minimal bookworm, built once and kept under CONVOY_FRESH_CACHE
# (default /var/tmp/convoy-fresh-root); each call works on a copy, so every run starts from the
# same empty machine. Only the way this machine reaches Debian's and PyPI's registries is carried
# in: its apt mirror, and the certificate bundles and pip settings its environment names (a TLS
# proxy sits in front of PyPI here; see PITFALLS.md). Nothing else of the host is visible.
#
# Exit status: the command's; 3 when no fresh root can be made here (not root, debootstrap
# missing and not installable, a mount refused), so that callers can tell "could not try" from
# "failed".
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
cache=${CONVOY_FRESH_CACHE:-/var/tmp/convoy-fresh-root}
pristine=$cache/bookworm
[ $# -gt 0 ] || set -- scripts/test.sh

cannot() {
  echo "fresh-root: cannot make a fresh Debian 12 root here: $*" >&2
  exit 3
}

[ "$(id -u)" -eq 0 ] || cannot "needs root (chroot, mount)"
git rev-parse --verify -q HEAD >/dev/null || cannot "no commit to clone in $repo"

# The Debian mirror this machine's apt uses (deb822 or one-line sources).
mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null)
[ -n "$mirror" ] ||
  mirror=$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian

if [ ! -f "$pristine/.convoy-complete" ]; then
  if ! command -v debootstrap >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1 ||
      cannot "debootstrap is not installed and could not be installed"
  fi
  echo "fresh-root: building a minimal Debian 12 root from $mirror (once, ~1 minute)" >&2
  rm -rf "$pristine" && mkdir -p "$cache"
  debootstrap --variant=minbase bookworm "$pristine" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    cannot "debootstrap failed (see $cache/debootstrap.log)"
  touch "$pristine/.convoy-complete"
fi

if ! root=$(mktemp -d "${TMPDIR:-/tmp}/convoy-fresh.XXXXXX") || [ ! -d "$root" ]; then
  cannot "mktemp -d under ${TMPDIR:-/tmp} failed"
fi
mounts=()
# The root holds this machine's /dev (and the compiler cache) bound in: it is removed only once
# nothing is mounted under it any more, and never across into another file system, so that a
# mount that would not go cannot take the host's files with it.
# shellcheck disable=SC2317 # run by the EXIT trap
finish() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}" 2>/dev/null; done
  if [ -n "${CONVOY_FRESH_KEEP:-}" ]; then
    echo "fresh-root: kept $root" >&2
  elif awk -v r="$root/" 'index($2 "/", r) == 1 { found = 1 } END { exit !found }' /proc/mounts; then
    echo "fresh-root: something is still mounted under $root; left in place" >&2
  else
    rm -rf --one-file-system "${root:?}"
  fi
}
trap finish EXIT
cp -a "$pristine/." "$root/" || cannot "copying the pristine root failed"
mount_into() {  # mount_into TARGET mount-arguments...
  local target=$root/$1
  shift
  mount "$@" "$target" 2>/dev/null || cannot "mount $* $target refused"
  mounts+=("$target")
}
mount_into proc -t proc proc
mount_into dev --bind /dev
mount_into dev/pts --bind /dev/pts
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null

# How this machine reaches the registries: certificate bundles the environment names (copied out
# of the way of the root's own ca-certificates package) and pip's settings.
env_args=()
mkdir -p "$root/etc/ssl/convoy-host"
for var in SSL_CERT_FILE PIP_CERT REQUESTS_CA_BUNDLE CURL_CA_BUNDLE GIT_SSL_CAINFO; do
  file=${!var:-}
  if [ -n "$file" ] && [ -f "$file" ]; then
    cp "$file" "$root/etc/ssl/convoy-host/$var.pem"
    env_args+=("$var=/etc/ssl/convoy-host/$var.pem")
  fi
done
for var in PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_TRUSTED_HOST PIP_DEFAULT_TIMEOUT; do
  [ -n "${!var:-}" ] && env_args+=("$var=${!var}")
done
[ -f /etc/pip.conf ] && grep -v '^ *cert *=' /etc/pip.conf >"$root/etc/pip.conf"

# The clone sits at the same path as this checkout, so that a build there compiles with the same
# command lines as one here (the tests' CONVOY_SOURCE_DIR among them).
mkdir -p "$root$(dirname "$repo")"
git clone -q "$repo" "$root$repo" || cannot "git clone of $repo failed"
echo "fresh-root: $(git -C "$root$repo" log -1 --format='%h %s' | cut -c1-100)" >&2

# CONVOY_FRESH_CCACHE=DIR: DIR (this machine's ccache) is the root's compiler cache. The root still
# installs everything itself (ccache too, through scripts/setup.sh; without it nothing is taken
# from the cache); what it takes are the objects that its own compiler, from the same Debian
# packages, would make from the same sources and headers (ccache hashes the compiler, the command
# line and every header's contents). CI uses it so that the root does not build everything again.
if [ -n "${CONVOY_FRESH_CCACHE:-}" ]; then
  mkdir -p "$CONVOY_FRESH_CCACHE" "$root/root/.cache/ccache"
  mount_into root/.cache/ccache --bind "$CONVOY_FRESH_CCACHE"
  echo "fresh-root: compiler cache from $CONVOY_FRESH_CCACHE" >&2
fi

start=$SECONDS
chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 CI=true \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${env_args[@]}" \
  /bin/bash -c 'cd "$0" && exec "$@"' "$repo" "$@"
rc=$?
echo "fresh-root: '$*' exited $rc after $((SECONDS - start)) s on a new Debian 12" >&2
exit $rc
