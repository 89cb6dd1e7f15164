#!/usr/bin/env bash
# Prints, one a line, the packages (dpkg's names, without the architecture) that own the shared
# libraries the given programs load: what the image's runtime stage must install for them. Run in
# the build stage, where the programs were linked (docker/Dockerfile), so that the list follows the
# base image's own names (Debian 12's libgrpc++1.51, Ubuntu's ...t64 names, CUDA's libcublas-13-0).
#
#   docker/runtime-packages.sh /opt/convoy/bin/*
#
# Fails, naming the library, when one is not found or belongs to no package: a runtime stage that
# installed the printed list would lack it.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 PROGRAM..." >&2; exit 2; }

owner() {  # owner PATH: the package(s) that installed PATH, or nothing
  local path=$1 candidate real
  real=$(readlink -f "$path")
  # Debian 12 and Ubuntu merge /lib into /usr/lib: dpkg knows a file under the name its package
  # shipped it, which may be either.
  for candidate in "$path" "$real" "/usr$path" "/usr$real" "${path#/usr}" "${real#/usr}"; do
    [ -n "$candidate" ] || continue
    dpkg-query -S "$candidate" 2>/dev/null | grep -v '^diversion' | head -1 |
      sed 's/: .*//; s/, /\n/g; s/:[a-z0-9_]*$//mg' && return 0
  done
  return 1
}

libs=$(ldd "$@" | awk '/=>/ {print $1, $3}' | sort -u)
status=0
packages=()
while read -r soname path; do
  [ -n "$soname" ] || continue
  if [ "$path" = "not" ]; then
    echo "runtime-packages: $soname is not found by the dynamic loader" >&2
    status=1
    continue
  fi
  if ! found=$(owner "$path") || [ -z "$found" ]; then
    echo "runtime-packages: $path ($soname) belongs to no installed package" >&2
    status=1
    continue
  fi
  while read -r p; do packages+=("${p%%:*}"); done <<<"$found"
done <<<"$libs"
[ "$status" -eq 0 ] || exit 1
printf '%s\n' "${packages[@]}" | sort -u
