#!/usr/bin/env bash
# `evaluate` normalizes hypotheses and references with the model's rule: references canonically
# equal to the model's own translations (nukta letters precomposed: U+095C for U+0921 U+093C, ...;
# spaces as NBSP; a trailing tab) give 100 % exact match.
# Usage: evaluate_canonical.sh ANUVAD MODEL CORPUS.tsv
set -uo pipefail
anuvad=$1 model=$2 corpus=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $1"; shift; for f in "$@"; do echo "--- $f"; cat -A "$f" | head -20; done; exit 1; }
cut -f1 "$corpus" > "$dir/test.en"
n=$(wc -l < "$dir/test.en")
"$anuvad" evaluate -m "$model" --test "$corpus" -o "$dir/hyp" > /dev/null 2> "$dir/err" || fail "evaluate failed" "$dir/err"
# The sed script, in bytes (no dependence on the locale): consonant + nukta (U+093C) → the
# precomposed letter U+0958..U+095F; space → NBSP; a tab after a non-empty line.
export LC_ALL=C
for c in 95:98 96:99 97:9a 9c:9b a1:9c a2:9d ab:9e af:9f; do
  printf 's/\xe0\xa4%b\xe0\xa4\xbc/\xe0\xa5%b/g\n' "\\x${c%%:*}" "\\x${c##*:}"
done > "$dir/precompose.sed"
printf 's/ /\xc2\xa0/g\n/./s/$/\t/\n' >> "$dir/precompose.sed"
sed -f "$dir/precompose.sed" "$dir/hyp" > "$dir/test.hi"
grep -q "$(printf '\xe0\xa5[\x98-\x9f]')" "$dir/test.hi" || fail "no translation has a nukta letter to precompose" "$dir/hyp"
"$anuvad" evaluate -m "$model" --test "$dir/test.en" "$dir/test.hi" > "$dir/eval" 2> "$dir/err" \
  || fail "evaluate failed" "$dir/err"
grep -q "^exact match = 100.00 % ($n of $n)$" "$dir/eval" || fail "not 100 % exact match" "$dir/eval"
echo "$n references canonically equal to the translations: 100 % exact match"
