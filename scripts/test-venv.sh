#!/usr/bin/env bash
# Creates or updates the Python virtual environment the tests use (.cache/test-venv, or
# CONVOY_TEST_VENV) from the pinned scripts/test-requirements.txt, and prints its python's path on
# stdout (pip's output goes to stderr):
#
#   python=$(scripts/test-venv.sh) && "$python" tests/deploy/validate_manifests.py .
#
# Idempotent and quick: when the venv's stamp holds the SHA-256 of the requirements file as it is
# now, nothing runs but a hash (no pip). Otherwise it takes a lock (ctest runs tests in parallel:
# one installs, the others wait for it), creates the venv with python3 if it is missing or broken,
# installs the requirements and writes the stamp. Needs python3 with venv and pip (scripts/setup.sh
# installs python3-venv) and PyPI, once.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${CONVOY_TEST_VENV:-$(pwd)/.cache/test-venv}
requirements=scripts/test-requirements.txt
stamp=$venv/.requirements.sha256
hash=$(sha256sum "$requirements" | cut -d' ' -f1)

up_to_date() {
  [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$hash" ]
}
if up_to_date; then
  echo "$venv/bin/python"
  exit 0
fi

mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if ! up_to_date; then  # another caller may have installed it while this one waited
  if ! "$venv/bin/python" -c "" 2>/dev/null; then
    echo "test-venv: creating $venv" >&2
    python3 -m venv --clear "$venv" >&2 || {
      echo "test-venv: python3 -m venv $venv failed (is python3-venv installed? scripts/setup.sh installs it)" >&2
      exit 1
    }
  fi
  rm -f "$stamp"
  echo "test-venv: installing $requirements into $venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements" >&2 || {
    echo "test-venv: pip could not install $requirements into $venv (see above)" >&2
    exit 1
  }
  echo "$hash" >"$stamp"
fi
echo "$venv/bin/python"
