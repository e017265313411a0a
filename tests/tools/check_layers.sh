#!/usr/bin/env bash
# The layering rule of README "Layout": a header or source under include/anuvad/X/ or src/X/
# includes anuvad headers only from X itself or from a lower layer:
#   core < text, nn < io < decode < train, inspect < cli
# (text and nn are side by side: neither includes the other; train and inspect likewise).
# Usage: check_layers.sh [SOURCE_DIR]; exit 1 naming every include that breaks the rule.
set -u
cd "${1:-$(dirname "$0")/../..}" || exit 2
rank() {
  case "$1" in
    core) echo 0 ;; text|nn) echo 1 ;; io) echo 2 ;; decode) echo 3 ;; train|inspect) echo 4 ;;
    cli) echo 5 ;; *) echo 99 ;;
  esac
}
status=0
checked=0
while IFS= read -r file; do
  layer=$(echo "$file" | sed -E 's#^(include/anuvad|src)/([a-z]+)/.*#\2#')
  while IFS= read -r inc; do
    target=$(echo "$inc" | sed -E 's#.*"anuvad/([a-z]+)/.*#\1#')
    checked=$((checked + 1))
    [ "$target" = "$layer" ] && continue
    if [ "$(rank "$target")" -ge "$(rank "$layer")" ]; then
      echo "$file: includes anuvad/$target/ from layer $layer (only lower layers may be included)"
      status=1
    fi
  done < <(grep -E '^#include "anuvad/' "$file")
done < <(find include/anuvad src -mindepth 2 -name '*.h' -o -mindepth 2 -name '*.cpp' | grep -E '^(include/anuvad|src)/[a-z]+/')
flat=$(find include/anuvad -maxdepth 1 -name '*.h'; find src -maxdepth 1 -name '*.cpp')
if [ -n "$flat" ]; then echo "outside any layer folder: $flat"; status=1; fi
[ "$checked" -gt 50 ] || { echo "only $checked includes found: wrong directory?"; status=1; }
[ "$status" = 0 ] && echo "layering holds: $checked anuvad includes checked"
exit "$status"
