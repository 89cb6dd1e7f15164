#!/usr/bin/env bash
# The design's module boundaries (docs/design.md: dependencies point inward; nothing includes
# frontend; the scheduler and kv never see an executor, gRPC or CUDA header), for every module of
# src/:
#  - every file of every module includes, of src/'s modules, only those its module may depend on,
#    and of the third-party libraries none its module is kept from (gRPC, CUDA, Boost.Asio, ...);
#    no include climbs out of its directory ("../");
#  - the modules with no third-party server library (kv, step, scheduler, text, model, common)
#    are also compiled (-fsyntax-only) with only their allowed modules visible, so that nothing
#    reaches a forbidden header in a way the scan above would miss.
#
#   tests/scripts/module_boundaries.sh CXX SOURCE_DIR      (MODULES="scheduler kv" for a few)
set -uo pipefail
cxx=$1
src=$2/src
include=$2/include
scratch=${TEST_TMPDIR:-${TMPDIR:-/tmp}}
if ! mkdir -p "$scratch" || ! view=$(mktemp -d -p "$scratch") || [ ! -d "$view" ]; then
  echo "cannot make a scratch folder under $scratch" >&2
  exit 1
fi
trap 'rm -rf "${view:?}"' EXIT

# module: the modules of src/ it may include (itself first).
declare -A allowed=(
  [common]="common"
  [kv]="kv"
  [step]="step kv"
  [scheduler]="scheduler step kv common"
  [text]="text"
  [model]="model text common"
  [config]="config scheduler step kv common"
  [executor]="executor step kv model text common"
  [grammar]="grammar"
  [engine]="engine executor scheduler step kv model text common grammar"
  [http]="http"
  [metrics]="metrics http scheduler step kv common"
  [frontend]="frontend config engine executor scheduler step kv model text common http metrics grammar"
  [tools]="tools engine executor scheduler step kv model text common grammar"
  [daemon]="daemon frontend config engine executor scheduler step kv model text common http metrics tools grammar"
)
# module: third-party include prefixes it must not use (a regular expression over the path).
declare -A forbidden=(
  [common]="^(grpc|grpcpp|boost|cuda|prometheus|oneapi|spdlog)"
  [kv]="^(grpc|grpcpp|boost|cuda|prometheus|oneapi|spdlog|nlohmann)"
  [step]="^(grpc|grpcpp|boost|cuda|prometheus|oneapi|spdlog|nlohmann)"
  [scheduler]="^(grpc|grpcpp|boost|cuda|prometheus|oneapi|spdlog|nlohmann)"
  [text]="^(grpc|grpcpp|boost|cuda|prometheus|oneapi)"
  [grammar]="^(grpc|grpcpp|boost|cuda|prometheus|oneapi)"
  [model]="^(grpc|grpcpp|boost|cuda|prometheus|oneapi)"
  [config]="^(grpcpp|boost|cuda|prometheus|oneapi)"
  [executor]="^(grpc|grpcpp|boost|prometheus)"
  [engine]="^(grpc|grpcpp|boost|cuda|prometheus|oneapi)"
  [http]="^(grpc|grpcpp|cuda|prometheus|oneapi)"
  [metrics]="^(grpc|grpcpp|cuda|oneapi)"
  [frontend]="^(cuda|oneapi)"
  [tools]="^(grpc|grpcpp|boost|cuda|prometheus)"
  [daemon]="^(cuda|oneapi)"
)
# Compiled in a view of only their allowed modules (their headers need no generated code).
compiled="common kv step scheduler text model grammar"

failures=0
fail() {
  echo "FAIL: $1"
  failures=$((failures + 1))
}

modules=${MODULES:-$(cd "$src" && ls -d */ | tr -d /)}
for module in $modules; do
  if [ -z "${allowed[$module]+x}" ]; then
    fail "src/$module/ has no entry in this script's table: say what it may include"
    continue
  fi
  while IFS= read -r file; do
    rel=${file#"$src"/}
    while IFS= read -r target; do
      case $target in
        ../* | */../*)
          fail "$rel includes \"$target\", outside its directory"
          continue
          ;;
      esac
      first=${target%%/*}
      if [ "$first" != "$target" ] && [ -d "$src/$first" ]; then
        if [[ " ${allowed[$module]} " != *" $first "* ]]; then
          fail "$rel includes $target: $module may include only ${allowed[$module]}"
        fi
      elif [[ $target =~ ${forbidden[$module]} ]]; then
        fail "$rel includes $target: $module may not use that library"
      fi
    done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^>"]+)[>"].*/\1/p' "$file")
  done < <(find "$src/$module" -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cuh' -o -name '*.cu' \))
done

for module in $compiled; do
  [[ " $modules " == *" $module "* ]] || continue
  dir=$view/$module
  mkdir -p "$dir"
  for dep in ${allowed[$module]}; do ln -s "$src/$dep" "$dir/$dep"; done
  for file in "$src/$module"/*.cc "$src/$module"/*.h; do
    [ -e "$file" ] || continue
    # Compiled from its place in the view, so that a relative include cannot reach around it.
    if ! out=$("$cxx" -std=c++20 -fsyntax-only -x c++ -I "$include" -I "$dir" \
      "$dir/$module/$(basename "$file")" 2>&1); then
      fail "src/$module/$(basename "$file") does not compile with only ${allowed[$module]} visible:"
      echo "$out" | grep -m 3 -E "fatal error|error:"
    fi
  done
done
if [ "$failures" -ne 0 ]; then
  echo "$failures boundary crossings (docs/design.md: dependencies point inward)"
  exit 1
fi
echo "every file of $(echo $modules) includes only what its module may; $compiled compile alone"
