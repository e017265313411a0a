#!/usr/bin/env bash
# Exact-match rate of greedy translations against the references of a TSV corpus.
# Usage: exact_match.sh ANUVAD MODEL CORPUS.tsv MIN_PERCENT
set -euo pipefail
anuvad=$1 model=$2 corpus=$3 min=$4
hyp=$(mktemp)
trap 'rm -f "$hyp"' EXIT
cut -f1 "$corpus" | "$anuvad" translate -m "$model" > "$hyp"
paste "$hyp" <(cut -f2 "$corpus") | awk -F'\t' -v min="$min" '
  { n++; if ($1 == $2) e++ }
  END { rate = 100 * e / n; printf "exact match %d/%d = %.1f%% (minimum %s%%)\n", e, n, rate, min; exit !(rate >= min) }'
