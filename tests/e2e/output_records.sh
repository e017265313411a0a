#!/usr/bin/env bash
# `translate` output formats (README "translate"): one record per input in every format, an
# empty input giving the empty translation with empty fields; --alignment soft rows that sum to
# 1; a --max-length the model cannot honour warned about, and the value used recorded.
# Usage: output_records.sh ANUVAD MODEL   (MODEL: the cli tiny model, max_positions 64)
set -uo pipefail
anuvad=$1 model=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $1"; shift; for f in "$@"; do echo "--- $f"; cat -A "$f"; done; exit 1; }
printf 'We are friends.\n\nHow are you?\n' > "$dir/in"
tl() { "$anuvad" translate -m "$model" --max-length 6 --cpu-threads 1 "$@" < "$dir/in" > "$dir/out" 2> "$dir/err" \
         || fail "translate $* failed" "$dir/err"; }

# --n-best -b 2: two records for sentences 0 and 2, one empty record for sentence 1.
tl -b 2 --n-best
[ "$(cut -d' ' -f1 "$dir/out" | tr '\n' ' ')" = "0 0 1 2 2 " ] || fail "--n-best: ids" "$dir/out"
grep -vqE '^[0-9]+ \|\|\| .* \|\|\| F0= -?[0-9]+\.[0-9]{6} \|\|\| -?[0-9]+\.[0-9]{6}$' "$dir/out" \
  && fail "--n-best: a record is not ID ||| text ||| F0= score ||| normalized" "$dir/out"
[ "$(sed -n 3p "$dir/out")" = "1 |||  ||| F0= 0.000000 ||| 0.000000" ] || fail "--n-best: empty record" "$dir/out"

# --word-scores: the empty translation with an empty list of scores.
tl --word-scores
[ "$(wc -l < "$dir/out")" -eq 3 ] && [ "$(sed -n 2p "$dir/out")" = " ||| WordScores= " ] \
  && sed -n 1p "$dir/out" | grep -qE '^.+ \|\|\| WordScores= -?[0-9]' || fail "--word-scores: records" "$dir/out"

# --alignment hard (with --word-scores and --n-best): every record has the same fields.
tl --alignment hard
[ "$(wc -l < "$dir/out")" -eq 3 ] && [ "$(sed -n 2p "$dir/out")" = " ||| " ] \
  && sed -n 3p "$dir/out" | grep -qE '^.+ \|\|\| [0-9]+-[0-9]+' || fail "--alignment hard: records" "$dir/out"
tl --alignment hard --word-scores --n-best
[ "$(sed -n 2p "$dir/out")" = "1 |||  |||  ||| WordScores=  ||| F0= 0.000000 ||| 0.000000" ] \
  || fail "--alignment hard --word-scores --n-best: empty record" "$dir/out"
[ "$(awk -F' \\|\\|\\| ' '{ print NF }' "$dir/out" | sort -u)" = "6" ] || fail "records with different field counts" "$dir/out"

# --alignment soft: each target subword's weights over the source subwords sum to 1 (up to the
# rounding of the 4 printed decimals).
printf 'We are friends.\nI like eating ice cream.\nThe dog is barking.\n' > "$dir/in"
tl --alignment soft
sed 's/.* ||| //' "$dir/out" | tr ' ' '\n' | awk -F, '
  NF == 0 { next }
  { n = 0; s = 0; for (i = 1; i <= NF; i++) { s += $i; n++ } rows++
    d = s - 1; if (d < 0) d = -d; if (d > 0.00005 * n + 1e-9) { print "row " rows " sums to " s; bad = 1 } }
  END { if (rows == 0) { print "no rows"; bad = 1 } exit bad }' || fail "--alignment soft: rows do not sum to 1" "$dir/out"

# --max-length 5000 with max_positions 64: one warning naming the cap 63; the dump records 63.
printf 'We are friends.\n' > "$dir/in"
"$anuvad" translate -m "$model" --max-length 5000 --attention "$dir/a.json" < "$dir/in" > "$dir/out" 2> "$dir/err"
[ "$(grep -c 'max-length 5000 exceeds .*max_positions − 1 = 63 .*using 63' "$dir/err")" -eq 1 ] \
  || fail "--max-length 5000: no warning naming the cap" "$dir/err"
grep -q '"max_length":63[,}]' "$dir/a.json" || fail "--max-length 5000: dump does not record 63"
# The default (256) is lowered silently; a value within the cap is used and recorded as given.
"$anuvad" translate -m "$model" --attention "$dir/a.json" < "$dir/in" > "$dir/out" 2> "$dir/err"
grep -q 'max-length' "$dir/err" && fail "default --max-length: unexpected warning" "$dir/err"
grep -q '"max_length":63[,}]' "$dir/a.json" || fail "default --max-length: dump does not record 63"
"$anuvad" translate -m "$model" --max-length 7 --attention "$dir/a.json" < "$dir/in" > /dev/null 2> "$dir/err"
grep -q '"max_length":7[,}]' "$dir/a.json" && [ ! -s "$dir/err" ] || fail "--max-length 7: recorded or warned" "$dir/err"
echo "one record per input in every format; soft rows sum to 1; --max-length capped with a warning"
