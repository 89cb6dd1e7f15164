#!/usr/bin/env bash
# ctest: deploy/kubernetes renders and is valid (tests/deploy/validate_manifests.py), run in the
# test venv (scripts/test-venv.sh installs kubernetes-validate there).
# Usage: tests/deploy/manifests_test.sh [REPO_ROOT]
set -euo pipefail
repo=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
python=$("$repo/scripts/test-venv.sh")
exec "$python" "$repo/tests/deploy/validate_manifests.py" "$repo"
