#!/usr/bin/env bash
# The design's module boundaries, checked by the compiler: each module below is compiled
# (-fsyntax-only) with only the source modules it may depend on visible, so that an include that
# crosses a boundary (the scheduler including an executor, frontend or gRPC header, say) fails to
# compile here even though the normal build, which sees all of src/, accepts it.
#
#   tests/scripts/module_boundaries.sh CXX SOURCE_DIR      (MODULES="scheduler kv" for a few)
set -uo pipefail
cxx=$1
src=$2/src
include=$2/include
view=$(mktemp -d)
trap 'rm -rf "$view"' EXIT

# module: the modules of src/ it may include (itself first). System and third-party headers
# (Abseil, nlohmann/json, PCRE2, protobuf) and include/convoy are visible to all.
declare -A allowed=(
  [kv]="kv"
  [step]="step kv"
  [scheduler]="scheduler step kv"
  [text]="text"
  [model]="model text common"
)
failures=0
for module in ${MODULES:-kv step scheduler text model}; do
  dir=$view/$module
  mkdir -p "$dir"
  for dep in ${allowed[$module]}; do ln -s "$src/$dep" "$dir/$dep"; done
  for file in "$src/$module"/*.cc "$src/$module"/*.h; do
    [ -e "$file" ] || continue
    # Compiled from its place in the view, so that a relative include cannot reach around it.
    if ! out=$("$cxx" -std=c++20 -fsyntax-only -x c++ -I "$include" -I "$dir" \
      "$dir/$module/$(basename "$file")" 2>&1); then
      echo "FAIL: src/$module/$(basename "$file") includes outside ${allowed[$module]}:"
      echo "$out" | grep -m 3 -E "fatal error|error:"
      failures=$((failures + 1))
    fi
  done
done
if [ "$failures" -ne 0 ]; then
  echo "$failures files cross a module boundary (docs/design.md: dependencies point inward)"
  exit 1
fi
echo "every file of ${!allowed[*]} compiles with only its allowed modules visible"
