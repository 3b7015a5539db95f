#!/usr/bin/env bash
# Fails when git tracks a file over 2 MB that is not on the allow-list below,
# or a compiled executable: built output belongs in .gitignore, not in git.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=$((2 * 1024 * 1024))
# Files allowed to be larger (data a test or a doc needs), one path a line.
allow=()
bad=0
while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue
  size=$(stat -c %s "$f")
  if [ "$size" -gt "$limit" ]; then
    ok=0
    for a in "${allow[@]}"; do [ "$a" = "$f" ] && ok=1; done
    if [ "$ok" = 0 ]; then echo "tracked file over 2 MB: $f ($size bytes)" >&2; bad=1; fi
  fi
  if head -c 4 "$f" | grep -q $'^\x7fELF'; then echo "tracked executable: $f" >&2; bad=1; fi
done < <(git ls-files -z)
exit "$bad"
