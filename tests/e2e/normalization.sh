#!/usr/bin/env bash
# The model's text normalization (README "Text handling") at translation time: text that differs
# only by canonical equivalence (NFC), whitespace kind, leading/trailing whitespace or a
# byte-order mark is translated and scored as the plain text; a line empty after normalization
# gives an empty output, as an empty line does (evaluate: tests/e2e/evaluate_canonical.sh).
# Usage: normalization.sh ANUVAD MODEL
set -uo pipefail
anuvad=$1 model=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $1"; shift; for f in "$@"; do echo "--- $f"; cat -A "$f"; done; exit 1; }
tl() { "$anuvad" translate -m "$model" --word-scores --max-length 6 --cpu-threads 1 "$@" 2> "$dir/err"; }

# फ़ोन typed with U+095E and with U+092B U+093C: the same translation and the same score.
pre=$'\u095e\u094b\u0928' dec=$'\u092b\u093c\u094b\u0928'
[ "$pre" != "$dec" ] || fail "the two spellings must differ byte-wise"
[ "$(tl "$pre")" = "$(tl "$dec")" ] || fail "फ़ोन: translations differ"
printf 'hello\t%s\nhello\t%s\n%s\tनमस्ते\n%s\tनमस्ते\n' "$pre" "$dec" "$pre" "$dec" \
  | "$anuvad" score -m "$model" --word-scores > "$dir/score" 2> "$dir/err" || fail "score failed" "$dir/err"
[ "$(sed -n 1p "$dir/score")" = "$(sed -n 2p "$dir/score")" ] || fail "फ़ोन (target): scores differ" "$dir/score"
[ "$(sed -n 3p "$dir/score")" = "$(sed -n 4p "$dir/score")" ] || fail "फ़ोन (source): scores differ" "$dir/score"

# Tab, NBSP, leading tab and trailing spaces: as "We are friends.".
plain=$(tl "We are friends.")
[ -n "$plain" ] || fail "no translation"
for variant in $'We are\tfriends.' $'We are\u00a0friends.' $'\tWe are friends.' $'We  are friends. \v'; do
  [ "$(tl "$variant")" = "$plain" ] || fail "'$variant' translates differently"
done
# The same on stdin, with a BOM at the start of line 2 (two files concatenated). Line by line
# (--mini-batch 1), as the argument is: a batch of 3 may round differently from a batch of 1, and
# an untrained model's near-tied logits can turn that into a different token (seen under ASan).
printf 'We are friends.\n\xef\xbb\xbfWe are friends.\nWe are\xc2\xa0friends.\n' | tl --mini-batch 1 > "$dir/out"
[ "$(sort -u "$dir/out" | wc -l)" -eq 1 ] && [ "$(head -1 "$dir/out")" = "$plain" ] \
  || fail "stdin: BOM/NBSP lines translate differently" "$dir/out"

# Lines that are only a tab, a VT, an NBSP or a BOM are empty: empty output lines, like "".
printf '\n\t\n\v\n\xc2\xa0\n\xef\xbb\xbf\nWe are friends.\n' | "$anuvad" translate -m "$model" --max-length 6 > "$dir/out" 2> "$dir/err"
[ $? -eq 0 ] || fail "blank lines: exit code not 0" "$dir/err"
[ "$(head -5 "$dir/out" | tr -d '\n' | wc -c)" -eq 0 ] && [ "$(wc -l < "$dir/out")" -eq 6 ] \
  || fail "blank lines must give 5 empty output lines, then a translation" "$dir/out"
# An argument that is only a newline: one empty output line.
"$anuvad" translate -m "$model" $'\n' > "$dir/out" 2> "$dir/err" || fail "argument newline failed" "$dir/err"
[ "$(od -An -tx1 "$dir/out" | tr -d ' \n')" = "0a" ] || fail "argument newline: expected one empty line" "$dir/out"
# score: a pair whose source is only an NBSP has an empty source side (an error, as for "").
printf '\xc2\xa0\tनमस्ते\n' | "$anuvad" score -m "$model" > "$dir/out" 2> "$dir/err"
[ $? -eq 1 ] && grep -q '<stdin>:1: empty source side' "$dir/err" || fail "score: NBSP source not empty" "$dir/err"

echo "फ़ोन both spellings, whitespace kinds, BOM and blank lines: translated and scored as normalized"
