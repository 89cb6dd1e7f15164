# shellcheck shell=bash disable=SC2034  # sets variables for the scripts that source it
# Sourced by the scripts that use llama.cpp's sources (llamacpp-compare.sh builds it;
# fetch-llamacpp-vocab.sh takes its test vocabularies and chat templates): the sdist of the PyPI
# package llama-cpp-python, which vendors llama.cpp (see its CHANGELOG.md for the commit), pinned
# here once. Bash; the caller has `set -euo pipefail`.

llamacpp_version=0.3.36
llamacpp_sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
# Where the sdist and what is built or unpacked from it are kept, outside the repository.
llamacpp_dir=${LLAMACPP_DIR:-/var/tmp/convoy-llamacpp}
llamacpp_sdist=$llamacpp_dir/llama_cpp_python-$llamacpp_version.tar.gz
# The top folder inside the sdist; llama.cpp itself is under $llamacpp_top/vendor/llama.cpp.
llamacpp_top=llama_cpp_python-$llamacpp_version

# fetch_llamacpp_sdist WHO: downloads the sdist from PyPI into $llamacpp_dir unless it is there,
# and checks its SHA-256. WHO names the caller in messages. Returns 1 (said on stderr) when it
# cannot.
fetch_llamacpp_sdist() {
  local who=$1
  if [ -f "$llamacpp_sdist" ] && echo "$llamacpp_sha256  $llamacpp_sdist" | sha256sum --check --status; then
    return 0
  fi
  if ! command -v python3 >/dev/null || ! python3 -m pip --version >/dev/null 2>&1; then
    echo "$who: python3 with pip is needed to fetch llama-cpp-python==$llamacpp_version from PyPI" >&2
    return 1
  fi
  mkdir -p "$llamacpp_dir"
  rm -f "$llamacpp_sdist"
  echo "$who: downloading the sdist of llama-cpp-python==$llamacpp_version from PyPI (77 MB, once)" >&2
  if ! python3 -m pip download --quiet --no-deps --no-binary :all: --dest "$llamacpp_dir" \
    "llama-cpp-python==$llamacpp_version" >&2; then
    echo "$who: pip could not download llama-cpp-python==$llamacpp_version" >&2
    return 1
  fi
  if ! echo "$llamacpp_sha256  $llamacpp_sdist" | sha256sum --check --status; then
    echo "$who: $llamacpp_sdist does not have the expected SHA-256 $llamacpp_sha256" >&2
    return 1
  fi
}

# build_llamacpp WHO LOG_DIR: builds llama-server, llama-bench and llama-quantize from the sdist's
# vendored llama.cpp (CPU only, -march=native, no CURL, no web UI, static) in
# $llamacpp_dir/build-$llamacpp_version, once: kept and reused while all three are there. Sets
# llama_server, llama_bench, llama_quantize and llama_commit (the llama.cpp commit the sdist
# vendors, from its CHANGELOG). Logs go to LOG_DIR. Returns 1 (said on stderr) when it cannot.
build_llamacpp() {
  local who=$1 logs=$2
  local src=$llamacpp_dir/$llamacpp_top/vendor/llama.cpp
  local lbuild=$llamacpp_dir/build-$llamacpp_version
  llama_server=$lbuild/bin/llama-server
  llama_bench=$lbuild/bin/llama-bench
  llama_quantize=$lbuild/bin/llama-quantize
  if [ ! -x "$llama_server" ] || [ ! -x "$llama_bench" ] || [ ! -x "$llama_quantize" ]; then
    fetch_llamacpp_sdist "$who" || return 1
    mkdir -p "$logs"
    [ -f "$src/CMakeLists.txt" ] || tar -xzf "$llamacpp_sdist" -C "$llamacpp_dir"
    echo "$who: building llama.cpp's llama-server, llama-bench, llama-quantize in $lbuild (once)" >&2
    # No web UI (its assets would be fetched from the network), no HTTPS, static binaries.
    if ! cmake -S "$src" -B "$lbuild" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
      -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF -DGGML_CUDA=OFF \
      >"$logs/llamacpp-cmake.log" 2>&1 ||
      ! cmake --build "$lbuild" -j "$(nproc)" --target llama-server llama-bench llama-quantize \
        >"$logs/llamacpp-build.log" 2>&1; then
      echo "$who: building llama.cpp failed (logs in $logs)" >&2
      return 1
    fi
  fi
  llama_commit=$(sed -n 's/^- feat: update llama.cpp to ggml-org\/llama.cpp@\([0-9a-f]*\).*/\1/p' \
    "$llamacpp_dir/$llamacpp_top/CHANGELOG.md" 2>/dev/null | head -n 1)
}
