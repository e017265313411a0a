#!/usr/bin/env bash
# Defined behaviour on awkward sentence pairs (README "Text handling") in `score` (a stream: a
# bad line is reported and skipped, later lines are still scored, exit 1), `evaluate` and
# `train` (files: a bad line stops the command naming FILE:LINE; a BOM and CRLF change nothing;
# over-long sources are truncated by evaluate and over-long pairs skipped by train, with warnings).
# Usage: text_input_pairs.sh ANUVAD MODEL CORPUS.tsv CONFIG.json
set -uo pipefail
anuvad=$1 model=$2 corpus=$3 config=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "$1"; for f in "${@:2}"; do echo "--- $f"; cat -A "$f"; done; exit 1; }
long=$(printf 'word %.0s' $(seq 1 400))

# score: 1 BOM + CRLF, 2 invalid UTF-8, 3 empty, 4 blank sides, 5 Hindi + emoji source, 6 NUL,
# 7 unknown characters, 8 over-long, 9 line 1 without BOM and CR.
printf '\xef\xbb\xbfhello\tनमस्ते\r\n\xc3\x28 bad\tनमस्ते\n\n   \t  \nमैं ठीक हूँ 😀\tनमस्ते\nNUL\x00\tनमस्ते\n☃ ☄ ⚘\tनमस्ते\n%s\tनमस्ते\nhello\tनमस्ते\n' "$long" > "$dir/score.in"
"$anuvad" score -m "$model" --word-scores < "$dir/score.in" > "$dir/score.out" 2> "$dir/score.err"
code=$?
[ $code -eq 1 ] || fail "score: exit code $code, expected 1" "$dir/score.out" "$dir/score.err"
[ "$(wc -l < "$dir/score.out")" -eq 9 ] || fail "score: expected 9 output lines" "$dir/score.out"
for expect in '2: invalid UTF-8 at byte 1' '3: no tab' '4: empty source side' '6: NUL byte at byte 4' \
              '8: longer than max_positions − 1'; do
  grep -q "<stdin>:$expect.* (line skipped)" "$dir/score.err" || fail "score: no error '<stdin>:$expect'" "$dir/score.err"
done
for n in 2 3 4 6 8; do [ -z "$(sed -n ${n}p "$dir/score.out")" ] || fail "score: line $n must be empty" "$dir/score.out"; done
for n in 1 5 7 9; do
  sed -n ${n}p "$dir/score.out" | grep -qE '^-[0-9.]+ \|\|\| WordScores= -' || fail "score: line $n not scored" "$dir/score.out"
done
[ "$(sed -n 1p "$dir/score.out")" = "$(sed -n 9p "$dir/score.out")" ] ||
  fail "score: the BOM/CRLF line scores differently from the same clean line" "$dir/score.out"
echo "score: 9 lines in, 9 out; lines 2 3 4 6 8 reported and skipped; BOM + CRLF line = clean line"

# evaluate: a BOM and CRLF line ends give exactly the scores of the clean file; a bad line is
# FILE:LINE and exit 1 with no scores (a partial test set would mislead); an over-long source
# is truncated with a warning naming FILE:LINE.
head -n 5 "$corpus" > "$dir/clean.tsv"
{ printf '\xef\xbb\xbf'; sed 's/$/\r/' "$dir/clean.tsv"; } > "$dir/bom_crlf.tsv"
"$anuvad" evaluate -m "$model" --test "$dir/clean.tsv" > "$dir/clean.out" 2> /dev/null ||
  fail "evaluate: clean file failed" "$dir/clean.out"
"$anuvad" evaluate -m "$model" --test "$dir/bom_crlf.tsv" > "$dir/bom_crlf.out" 2> /dev/null ||
  fail "evaluate: BOM/CRLF file failed" "$dir/bom_crlf.out"
cmp -s "$dir/clean.out" "$dir/bom_crlf.out" || fail "evaluate: BOM/CRLF scores differ" "$dir/clean.out" "$dir/bom_crlf.out"
for bad_line in 'invalid UTF-8 at byte 1:\xc3\x28 bad\tनमस्ते' 'NUL byte at byte 2:a\x00b\tनमस्ते' \
                'no tab:' 'empty target side:hello\t  '; do
  why=${bad_line%%:*}
  { head -n 1 "$dir/clean.tsv"; printf '%b\n' "${bad_line#*:}"; } > "$dir/bad.tsv"
  "$anuvad" evaluate -m "$model" --test "$dir/bad.tsv" > "$dir/bad.out" 2> "$dir/bad.err"
  code=$?
  [ $code -eq 1 ] && grep -qF "anuvad: error: $dir/bad.tsv:2: $why" "$dir/bad.err" && [ ! -s "$dir/bad.out" ] ||
    fail "evaluate: '$why' gave exit $code" "$dir/bad.out" "$dir/bad.err"
done
{ cat "$dir/clean.tsv"; printf '%s\tनमस्ते\n' "$long"; } > "$dir/long.tsv"
"$anuvad" evaluate -m "$model" --test "$dir/long.tsv" > "$dir/long.out" 2> "$dir/long.err" ||
  fail "evaluate: over-long source failed" "$dir/long.err"
grep -q "$dir/long.tsv:6: source has [0-9]* subwords, truncated" "$dir/long.err" ||
  fail "evaluate: no truncation warning" "$dir/long.err"
grep -q '^sentences = 6$' "$dir/long.out" || fail "evaluate: the truncated sentence was not scored" "$dir/long.out"
echo "evaluate: BOM + CRLF = clean; 4 bad-line cases are FILE:2 errors; over-long source truncated"

# train: the same bad lines stop it with FILE:LINE before any training; an over-long pair is
# skipped with a warning; Hindi and emoji on the source side are ordinary training text.
for bad_line in 'invalid UTF-8 at byte 1:\xc3\x28 bad\tनमस्ते' 'NUL byte at byte 2:a\x00b\tनमस्ते' \
                'no tab:' 'empty source side: \tनमस्ते'; do
  why=${bad_line%%:*}
  { head -n 1 "$corpus"; printf '%b\n' "${bad_line#*:}"; } > "$dir/bad.tsv"
  "$anuvad" train --train-sets "$dir/bad.tsv" --no-valid -c "$config" -m "$dir/bad.safetensors" > "$dir/bad.err" 2>&1
  code=$?
  [ $code -eq 1 ] && grep -qF "anuvad: error: $dir/bad.tsv:2: $why" "$dir/bad.err" && [ ! -e "$dir/bad.safetensors" ] ||
    fail "train: '$why' gave exit $code" "$dir/bad.err"
done
{ cat "$corpus"; printf '%s\tनमस्ते\nमैं ठीक हूँ 😀\tमैं ठीक हूँ\n' "$long"; } > "$dir/long.tsv"
"$anuvad" train --train-sets "$dir/long.tsv" --no-valid -c "$config" --after-epochs 2 --cpu-threads 2 \
  -m "$dir/long.safetensors" > "$dir/train.err" 2>&1 || fail "train: failed" "$dir/train.err"
grep -q "skipped 1 training and 0 validation pairs longer than max_positions − 1" "$dir/train.err" ||
  fail "train: no warning for the over-long pair" "$dir/train.err"
grep -qE "corpus: $(( $(wc -l < "$corpus") + 2 )) training pairs" "$dir/train.err" ||
  fail "train: the Hindi/emoji pair was not read" "$dir/train.err"
echo "train: 4 bad-line cases are FILE:2 errors; over-long pair skipped with a warning"
