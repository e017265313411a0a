#!/usr/bin/env bash
# Defined behaviour of `anuvad translate` on awkward input lines (README "Text handling"):
# one output line per input line, in order; a bad line is reported with its line number and
# skipped (an empty record), later lines are still translated, and the exit code is 1.
# Usage: text_input.sh ANUVAD MODEL
set -uo pipefail
anuvad=$1 model=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
long=$(printf 'word %.0s' $(seq 1 400))
# 1 BOM + CRLF, 2 invalid UTF-8, 3 empty, 4 whitespace only, 5 Hindi + emoji, 6 NUL byte,
# 7 unknown characters, 8 over-long line (truncated with a warning), 9 line 1 without BOM and CR
printf '\xef\xbb\xbfHello.\r\n\xc3\x28 bad\n\n   \nमैं ठीक हूँ 😀\nNUL\x00byte\n☃ ☄ ⚘\n%s\nHello.\n' "$long" > "$dir/in"
"$anuvad" translate -m "$model" --word-scores --mini-batch 4 --max-length 6 < "$dir/in" > "$dir/out" 2> "$dir/err"
code=$?
fail() { echo "$1"; echo "--- stdout"; cat -A "$dir/out"; echo "--- stderr"; cat "$dir/err"; exit 1; }
[ $code -eq 1 ] || fail "exit code $code, expected 1 (one bad line)"
[ "$(wc -l < "$dir/out")" -eq 9 ] || fail "expected 9 output lines"
grep -q '<stdin>:2: invalid UTF-8 at byte 1 (line skipped)' "$dir/err" || fail "line 2 not reported"
grep -q '<stdin>:6: NUL byte at byte 4 (line skipped)' "$dir/err" || fail "line 6 not reported"
grep -q '<stdin>:8: source has .* subwords, truncated' "$dir/err" || fail "no truncation warning for line 8"
for n in 2 3 4 6; do  # the empty record of the format (README "translate")
  [ "$(sed -n ${n}p "$dir/out")" = " ||| WordScores= " ] || fail "bad, empty and blank lines must give empty records"
done
for n in 1 5 7 8 9; do
  sed -n ${n}p "$dir/out" | grep -q ' ||| WordScores= -' || fail "line $n was not translated"
done
if grep -q $'\r' "$dir/out"; then fail "a CR leaked into the output"; fi
# Lines 1 and 9 are the same sentence once normalized: the same hypothesis, byte for byte, and word
# scores within 1e-5 (they sit in different mini-batches, and a row's floating-point sums depend
# on its batch: README "translate", tests/e2e/batched.sh).
[ "$(sed -n 1p "$dir/out" | sed 's/ ||| .*//')" = "$(sed -n 9p "$dir/out" | sed 's/ ||| .*//')" ] ||
  fail "the BOM/CRLF line translates differently from the same clean line"
paste -d'|' <(sed -n '1s/.*WordScores= //p' "$dir/out") <(sed -n '9s/.*WordScores= //p' "$dir/out") |
  awk -F'|' '{ a = split($1, g, " "); b = split($2, f, " "); if (a != b) exit 1
               for (i = 1; i <= a; i++) { d = g[i] - f[i]; if (d < 0) d = -d; if (d > 1e-5) exit 1 } }' ||
  fail "the BOM/CRLF line's word scores differ from the same clean line's by more than 1e-5"
echo "9 lines in, 9 lines out; bad lines 2 and 6 reported and skipped; line 8 truncated; BOM + CRLF line = clean line"
