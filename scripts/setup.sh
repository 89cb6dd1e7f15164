#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test convoy. Idempotent; prints nothing
# when everything is already there. The CUDA toolkit is optional (the CPU executor needs none).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git python3 python3-pip python3-venv xz-utils unzip
  libabsl-dev libspdlog-dev nlohmann-json3-dev libboost-dev
  libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc
  libdnnl-dev ocl-icd-opencl-dev prometheus-cpp-dev libpcre2-dev libutf8proc-dev libssl-dev openssl
  libgtest-dev libgmock-dev libbenchmark-dev ccache
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
