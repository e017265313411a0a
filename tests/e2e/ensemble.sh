#!/usr/bin/env bash
# Ensembles (--models, --weights) of translate, score and evaluate: an ensemble of one model is
# byte-identical to the model (greedy; beam 4 with --n-best and --word-scores; score; evaluate),
# a model twice with weights 0.5 0.5 gives its translations and scores, the forced score of two
# different models is w1·score1 + w2·score2 token by token, and a bad --weights count or
# different target vocabularies are one-line errors with a non-zero exit.
# Usage: ensemble.sh ANUVAD CORPUS.tsv CONFIG.json
set -uo pipefail
anuvad=$1 corpus=$2 config=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
train=(train --train-sets "$corpus" --no-valid -c "$config" --after-epochs 2 --cpu-threads 1 -q --disp-freq 0)
for run in "a --seed 1" "b --seed 2" "c --seed 1 --tgt-vocab-size 70"; do
  set -- $run
  name=$1; shift
  "$anuvad" "${train[@]}" "$@" -m "$dir/$name.safetensors" > "$dir/$name.log" 2>&1 || { cat "$dir/$name.log"; fail "training $name"; }
done
a=$dir/a.safetensors b=$dir/b.safetensors c=$dir/c.safetensors
cut -f1 "$corpus" > "$dir/src.txt"
run() {  # run OUT ARGS...: anuvad ARGS with the corpus sources on stdin, stdout to OUT
  local out=$1; shift
  "$anuvad" "$@" --cpu-threads 1 < "$dir/src.txt" > "$out" 2> "$out.err" || { cat "$out.err"; fail "anuvad $*"; }
}

# An ensemble of one is the model, byte for byte.
for flags in "-b 1" "-b 4 --n-best --word-scores"; do
  run "$dir/single.txt" translate -m "$a" $flags --max-length 12
  run "$dir/one.txt" translate --models "$a" --weights 1 $flags --max-length 12
  cmp -s "$dir/single.txt" "$dir/one.txt" || fail "--models a ($flags) differs from -m a"
  run "$dir/twice.txt" translate --models "$a" "$a" --weights 0.5 0.5 $flags --max-length 12
  python3 - "$dir/single.txt" "$dir/twice.txt" <<'PY' || fail "--models a a --weights 0.5 0.5 ($flags) differs from -m a"
import re, sys
one, two = (open(p, encoding="utf-8").read().splitlines() for p in sys.argv[1:])
assert len(one) == len(two) and one, "line counts"
num = re.compile(r"-?[0-9]+\.[0-9]+")
for x, y in zip(one, two):
    assert num.sub("#", x) == num.sub("#", y), f"{x!r} vs {y!r}"  # same words and fields
    for p, q in zip(num.findall(x), num.findall(y)):
        assert abs(float(p) - float(q)) <= 2e-6, f"{x!r} vs {y!r}"
PY
done
[ "$(wc -l < "$dir/single.txt")" -gt "$(wc -l < "$dir/src.txt")" ] || fail "--n-best printed one line per source"

# Forced scores: one = the model; a + b = 0.3·a + 0.7·b, token by token.
paste "$dir/src.txt" <(cut -f2 "$corpus") > "$dir/pairs.tsv"
score() { local out=$1; shift; "$anuvad" score --word-scores "$@" --cpu-threads 1 < "$dir/pairs.tsv" > "$out" 2>&1 || { cat "$out"; fail "score $*"; }; }
score "$dir/sa.txt" -m "$a"
score "$dir/s1.txt" --models "$a"
cmp -s "$dir/sa.txt" "$dir/s1.txt" || fail "score --models a differs from -m a"
score "$dir/sb.txt" -m "$b"
score "$dir/sab.txt" --models "$a" "$b" --weights 0.3 0.7
python3 - "$dir/sa.txt" "$dir/sb.txt" "$dir/sab.txt" <<'PY' || fail "ensemble score is not 0.3·a + 0.7·b"
import sys
def scores(path):
    return [[float(v) for v in l.replace("||| WordScores=", "").split()] for l in open(path)]
a, b, ab = (scores(p) for p in sys.argv[1:])
assert len(a) == len(b) == len(ab) and a
differ = 0
for x, y, z in zip(a, b, ab):
    assert len(x) == len(y) == len(z), "token counts"
    for p, q, r in zip(x, y, z):
        assert abs(0.3 * p + 0.7 * q - r) <= 1e-5 * max(1.0, abs(r)) + 2e-6, f"{r} vs 0.3·{p} + 0.7·{q}"
        differ += abs(p - q) > 1e-3
assert differ > 0, "models a and b score alike: the test proves nothing"
print(f"ensemble scores are 0.3·a + 0.7·b ({len(ab)} pairs)")
PY

# evaluate: an ensemble of one scores as the model; an ensemble of two runs.
"$anuvad" evaluate -m "$a" --test "$corpus" -b 4 --cpu-threads 1 > "$dir/ea.txt" 2>/dev/null || fail "evaluate -m a"
"$anuvad" evaluate --models "$a" --test "$corpus" -b 4 --cpu-threads 1 > "$dir/e1.txt" 2>/dev/null || fail "evaluate --models a"
cmp -s "$dir/ea.txt" "$dir/e1.txt" || fail "evaluate --models a differs from -m a"
"$anuvad" evaluate --models "$a" "$b" --test "$corpus" --json --cpu-threads 1 2>/dev/null |
  grep -q '"models":\[[^]]*a.safetensors",[^]]*b.safetensors"\],' || fail "evaluate --models a b --json"

# Errors: one line, non-zero exit, nothing on stdout.
expect_error() {  # expect_error REGEX ARGS... (translates "hello", given before the greedy lists)
  local regex=$1; shift
  if "$anuvad" translate hello "$@" > "$dir/err.out" 2> "$dir/err.txt"; then fail "anuvad $* succeeded"; fi
  [ ! -s "$dir/err.out" ] || fail "anuvad $* printed a translation"
  [ "$(wc -l < "$dir/err.txt")" -eq 1 ] && grep -Eq "$regex" "$dir/err.txt" || { cat "$dir/err.txt"; fail "message of anuvad $*"; }
}
expect_error '^anuvad: error: --weights has 1 values but there are 2 models' --models "$a" "$b" --weights 1
expect_error "^anuvad: error: $a and $c have different target vocabularies" --models "$a" "$c"
if "$anuvad" translate hello -m "$a" --models "$b" > /dev/null 2>&1; then fail "-m with --models accepted"; fi
echo "ensembles: one model identical, a a 0.5 0.5 identical, scores weighted, errors refused"
