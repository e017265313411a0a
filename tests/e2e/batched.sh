#!/usr/bin/env bash
# Batched translation (--mini-batch 32, sorted by length) and line by line (--mini-batch 1) give
# identical hypotheses, byte for byte, and word scores within TOL (README "translate": padding
# changes the order of floating-point sums, so scores may differ in the last digits).
# Usage: batched.sh ANUVAD MODEL CORPUS.tsv TOL
set -uo pipefail
anuvad=$1 model=$2 corpus=$3 tol=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cut -f1 "$corpus" > "$dir/src"
for mb in 1 32; do
  "$anuvad" translate -m "$model" -b 4 --word-scores --mini-batch $mb < "$dir/src" > "$dir/out$mb" || exit 1
  sed 's/ ||| WordScores= .*//' "$dir/out$mb" > "$dir/hyp$mb"
  sed 's/.* ||| WordScores= //' "$dir/out$mb" > "$dir/scores$mb"
done
cmp "$dir/hyp1" "$dir/hyp32" || { echo "hypotheses differ"; diff "$dir/hyp1" "$dir/hyp32" | head; exit 1; }
paste -d'|' "$dir/scores1" "$dir/scores32" | awk -F'|' -v tol="$tol" '
  { n++; a = split($1, g, " "); b = split($2, f, " ")
    if (a != b) { print "line " n ": " a " vs " b " scores"; bad = 1; next }
    for (i = 1; i <= a; i++) { d = g[i] - f[i]; if (d < 0) d = -d; if (d > worst) worst = d }
  }
  END { printf "%d lines: hypotheses identical; largest word-score |difference| %.2e (tolerance %s)\n", n, worst, tol
        exit bad || !(n > 0 && worst <= tol) }'
