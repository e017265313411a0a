#!/usr/bin/env bash
# A/B of two anuvad binaries translating a file with a trained model, as a user runs it:
# the runs alternate (old, new, old, new, ...) so that both sides see the same machine load,
# and the script prints each side's wall-clock seconds, their medians and the speed ratio.
# It also checks that both binaries print the same translations.
#
# usage: tests/bench/translate_ab.sh OLD_ANUVAD NEW_ANUVAD MODEL INPUT [ROUNDS] [-- OPTIONS...]
#   INPUT: one English sentence per line (a TSV's first column works: cut -f1 data/test.tsv)
#   ROUNDS: alternations (default 5); OPTIONS: passed to `anuvad translate` (e.g. --mini-batch 64;
#   give it whenever the two binaries' defaults differ: 16 before revision a4757dc, 32 after)
set -euo pipefail
if [ $# -lt 4 ]; then
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
old=$1 new=$2 model=$3 input=$4
rounds=5
shift 4
if [ $# -gt 0 ] && [ "$1" != "--" ]; then rounds=$1; shift; fi
[ $# -gt 0 ] && [ "$1" = "--" ] && shift
for f in "$old" "$new" "$model" "$input"; do
  [ -e "$f" ] || { echo "translate_ab.sh: $f: no such file" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$rounds"); do
  for side in old new; do
    bin=$old
    [ $side = new ] && bin=$new
    start=$(date +%s.%N)
    "$bin" translate -m "$model" "$@" < "$input" > "$tmp/$side.out" 2> "$tmp/$side.err" ||
      { echo "translate_ab.sh: $bin failed:" >&2; tail -3 "$tmp/$side.err" >&2; exit 1; }
    echo "$start $(date +%s.%N)" >> "$tmp/$side.times"
  done
done
cmp -s "$tmp/old.out" "$tmp/new.out" && same=yes || same=no
python3 - "$tmp" "$same" "$(wc -l < "$input")" <<'EOF'
import statistics, sys
tmp, same, lines = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = {s: [float(b) - float(a) for a, b in (line.split() for line in open(f"{tmp}/{s}.times"))]
     for s in ("old", "new")}
m = {s: statistics.median(v) for s, v in t.items()}
for s in ("old", "new"):
    print(f"{s}: " + " ".join(f"{x:.3f}" for x in t[s]) + f" s; median {m[s]:.3f} s ({lines / m[s]:.0f} sentences/s)")
print(f"new / old speed: {m['old'] / m['new']:.2f}x; same translations: {same}")
EOF
