#!/usr/bin/env bash
# Batched translation (--mini-batch 32, sorted by length) and line by line (--mini-batch 1) give
# identical hypotheses, byte for byte, and word scores within TOL (README "translate": padding
# changes the order of floating-point sums, so scores may differ in the last digits). Both run
# with --compute-type COMPUTE_TYPE (default float32); in bfloat16 on a CPU with AVX-512 BF16 the
# activations of every product are rounded to bfloat16, which turns those last-digit differences
# into occasional roundings the other way, a few 1e-3 nats: its tolerance is wider.
# Usage: batched.sh ANUVAD MODEL CORPUS.tsv TOL [COMPUTE_TYPE]
set -uo pipefail
anuvad=$1 model=$2 corpus=$3 tol=$4 compute_type=${5:-float32}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cut -f1 "$corpus" > "$dir/src"
for mb in 1 32; do
  "$anuvad" translate -m "$model" -b 4 --word-scores --mini-batch $mb --compute-type "$compute_type" < "$dir/src" > "$dir/out$mb" || exit 1
  sed 's/ ||| WordScores= .*//' "$dir/out$mb" > "$dir/hyp$mb"
  sed 's/.* ||| WordScores= //' "$dir/out$mb" > "$dir/scores$mb"
done
cmp "$dir/hyp1" "$dir/hyp32" || { echo "hypotheses differ"; diff "$dir/hyp1" "$dir/hyp32" | head; exit 1; }
paste -d'|' "$dir/scores1" "$dir/scores32" | awk -F'|' -v tol="$tol" -v ct="$compute_type" '
  { n++; a = split($1, g, " "); b = split($2, f, " ")
    if (a != b) { print "line " n ": " a " vs " b " scores"; bad = 1; next }
    for (i = 1; i <= a; i++) { d = g[i] - f[i]; if (d < 0) d = -d; if (d > worst) worst = d }
  }
  END { printf "%s: %d lines: hypotheses identical; largest word-score |difference| %.2e (tolerance %s)\n", ct, n, worst, tol
        exit bad || !(n > 0 && worst <= tol) }'
