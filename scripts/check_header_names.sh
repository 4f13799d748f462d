#!/usr/bin/env bash
# Header comments are contracts: every identifier one names in backticks (`name`, `name()`, `ns::name`)
# must exist in the code under src/ (outside comments). Prints each one that does not; exit 1 if any.
# Usage: scripts/check_header_names.sh [source root]      (CTest runs it as header_comment_names)
set -euo pipefail
cd "${1:-$(dirname "$0")/../src}"
words=$(mktemp)
trap 'rm -f "$words"' EXIT
find . \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) -print0 |
  xargs -0 sed -e 's://.*$::' | grep -oE '[A-Za-z_][A-Za-z0-9_]*' | sort -u > "$words"
missing=0
while IFS= read -r hit; do
  where=${hit%%:*}; rest=${hit#*:}; line=${rest%%:*}; comment=${rest#*:}; comment=${comment#*//}
  while IFS= read -r tok; do
    name=${tok//\`/}; name=${name%()}; name=${name##*::}
    [[ $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || continue
    [[ ${tok//\`/} =~ ^([A-Za-z_][A-Za-z0-9_]*::)*[A-Za-z_][A-Za-z0-9_]*(\(\))?$ ]] || continue
    if ! grep -qxF "$name" "$words"; then
      echo "$where:$line: $tok is named in a comment but not in the code"
      missing=1
    fi
  done < <(grep -oE '`[^`]+`' <<< "$comment" || true)
done < <(find . -name '*.h' -print0 | xargs -0 grep -n '//' /dev/null || true)
exit "$missing"
