#!/usr/bin/env bash
# Fails when a folder includes a header of a folder it must not depend on (DESIGN.md):
#   kernels <- engine <- scheduler <- runtime <- server <- cli,  jinja <- api <- server,
#   engine <- tools <- cli,  grammar <- engine,  common <- all.
# Also: Boost.Beast/Asio and prometheus-cpp only in server/, CLI11 only in cli/.
# Run by scripts/test.sh; prints every offending line.
set -euo pipefail
cd "${SPILLWAY_LAYERING_ROOT:-$(dirname "$0")/..}"

# folder -> the project folders it may include (besides itself and common).
declare -A allowed=(
  [common]=""
  [kernels]=""
  [grammar]=""
  [engine]="kernels grammar"
  [tools]="engine kernels grammar"
  [scheduler]="engine kernels grammar"
  [runtime]="scheduler engine kernels grammar"
  [jinja]=""
  [api]="jinja"
  [server]="runtime scheduler engine kernels grammar api jinja"
  [cli]="server runtime scheduler engine kernels grammar api jinja tools"
)
project_folders=" ${!allowed[*]} "

status=0
for folder in "${!allowed[@]}"; do
  [ -d "$folder" ] || continue
  ok=" $folder common ${allowed[$folder]} "
  while IFS= read -r line; do
    file=${line%%:*}
    target=$(sed -E 's/.*#include "([^/"]+)\/.*/\1/' <<<"$line")
    if [[ "$project_folders" == *" $target "* && "$ok" != *" $target "* ]]; then
      echo "layering: $line  ($folder/ must not include $target/)"
      status=1
    fi
  done < <(grep -rnE '^#include "[a-z_]+/' "$folder" --include='*.h' --include='*.cpp' || true)
done

check_library() {  # pattern, the only folder that may include it, what it is
  local offenders
  offenders=$(grep -rnE "^#include <($1)" --include='*.h' --include='*.cpp' \
    $(for f in "${!allowed[@]}"; do [ "$f" != "$2" ] && [ -d "$f" ] && echo "$f"; done) || true)
  if [ -n "$offenders" ]; then
    echo "layering: $3 outside $2/:"
    echo "$offenders"
    status=1
  fi
}
check_library 'boost/' server 'Boost'
check_library 'prometheus/' server 'prometheus-cpp'
check_library 'CLI/' cli 'CLI11'

if [ "$status" -eq 0 ]; then echo "layering: ok (${!allowed[*]})"; fi
exit "$status"
