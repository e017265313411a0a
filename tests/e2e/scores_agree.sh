#!/usr/bin/env bash
# `translate --word-scores` and `score --word-scores` of the same greedy output agree per token.
# The decoder's log-probabilities while generating (KV-cached path) must equal forced decoding
# of the output (teacher-forced path) within TOL on every line whose output, re-encoded by
# `score`, has as many subwords as the decoder emitted (README "score": score re-tokenizes the
# text, so a non-canonical segmentation is scored as other tokens). Those lines are counted as
# re-segmented and skipped; at least half of the lines must be compared.
# Usage: scores_agree.sh ANUVAD MODEL CORPUS.tsv TOL
set -euo pipefail
anuvad=$1 model=$2 corpus=$3 tol=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cut -f1 "$corpus" > "$dir/src"
"$anuvad" translate -m "$model" --word-scores < "$dir/src" > "$dir/out"
sed 's/ ||| WordScores= .*//' "$dir/out" > "$dir/hyp"
sed 's/.* ||| WordScores= //' "$dir/out" > "$dir/gen_scores"
paste "$dir/src" "$dir/hyp" | "$anuvad" score -m "$model" --word-scores | sed 's/.* ||| WordScores= //' > "$dir/forced_scores"
paste -d'|' "$dir/gen_scores" "$dir/forced_scores" | awk -F'|' -v tol="$tol" '
  { n++; a = split($1, g, " "); b = split($2, f, " ")
    if (a != b) { skipped++; next }
    compared++
    for (i = 1; i <= a; i++) { d = g[i] - f[i]; if (d < 0) d = -d; if (d > worst) worst = d }
  }
  END { printf "%d lines: %d compared, %d re-segmented; largest |difference| %.2e (tolerance %s)\n", n, compared, skipped, worst, tol
        exit !(compared >= n / 2 && worst <= tol) }'
