#!/usr/bin/env bash
# What `anuvad train` reads: several corpora in -t (a TSV and an .en/.hi pair read as one), and
# --sentencepiece-alphas (subword sampling): 0 leaves the model byte-identical to a run without
# the flag, 0.5 trains another model, the same one again with the same seed; --rdrop-alpha
# (R-Drop) and --layer-dropout the same way; --lr-decay's range and log line.
# Usage: training_data.sh ANUVAD CORPUS.tsv CONFIG.json
set -uo pipefail
anuvad=$1 corpus=$2 config=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
head -n 10 "$corpus" > "$dir/a.tsv"
tail -n +11 "$corpus" | cut -f1 > "$dir/b.en"
tail -n +11 "$corpus" | cut -f2 > "$dir/b.hi"
n=$(wc -l < "$corpus")
train=(train --no-valid -c "$config" --src-vocab-size 60 --tgt-vocab-size 80 --after-epochs 3
       --seed 5 --cpu-threads 1 -q --disp-freq 0 --no-resume)
"$anuvad" "${train[@]}" -t "$dir/a.tsv" -t "$dir/b.en" -m "$dir/mixed.safetensors" > "$dir/mixed.log" 2>&1 ||
  { cat "$dir/mixed.log"; exit 1; }
grep -q "corpus: $n training pairs" "$dir/mixed.log" ||
  { echo "-t a.tsv -t b.en: not the $n pairs of both"; cat "$dir/mixed.log"; exit 1; }
echo "-t a.tsv -t b.en: $n pairs"
"$anuvad" "${train[@]}" -t "$dir/a.tsv" "$dir/nothing.hi" -m "$dir/bad.safetensors" > "$dir/bad.log" 2>&1 &&
  { echo "a .hi without its .en was accepted"; exit 1; }
grep -q "nothing.hi: a target file without its source" "$dir/bad.log" || { cat "$dir/bad.log"; exit 1; }
for run in "plain" "alpha0 --sentencepiece-alphas 0" "alpha5 --sentencepiece-alphas 0.5" \
           "alpha5again --sentencepiece-alphas 0.5" "rdrop0 --rdrop-alpha 0" "rdrop5 --rdrop-alpha 5" \
           "rdrop5again --rdrop-alpha 5" "layer0 --layer-dropout 0" "layer3 --layer-dropout 0.3" \
           "layer3again --layer-dropout 0.3" "lrdecay --lr-decay 0.5"; do
  set -- $run
  name=$1
  shift
  "$anuvad" "${train[@]}" -t "$corpus" "$@" -m "$dir/$name.safetensors" > "$dir/$name.log" 2>&1 ||
    { cat "$dir/$name.log"; exit 1; }
done
cmp -s "$dir/plain.safetensors" "$dir/alpha0.safetensors" ||
  { echo "--sentencepiece-alphas 0 changed the model"; exit 1; }
grep -q "subword sampling (Kudo 2018): alpha 0.5 source, 0.5 target" "$dir/alpha5.log" ||
  { echo "no subword sampling log line"; cat "$dir/alpha5.log"; exit 1; }
cmp -s "$dir/plain.safetensors" "$dir/alpha5.safetensors" &&
  { echo "--sentencepiece-alphas 0.5 trained the same model"; exit 1; }
cmp -s "$dir/alpha5.safetensors" "$dir/alpha5again.safetensors" ||
  { echo "--sentencepiece-alphas 0.5 twice with one seed: different models"; exit 1; }
echo "sampling: alpha 0 = off byte for byte, alpha 0.5 another model, reproducible"
# --rdrop-alpha (R-Drop): 0 is off byte for byte; 5 trains another model, reproducibly, and says so.
cmp -s "$dir/plain.safetensors" "$dir/rdrop0.safetensors" || { echo "--rdrop-alpha 0 changed the model"; exit 1; }
grep -q "R-Drop 5.0" "$dir/rdrop5.log" || { echo "no R-Drop in the log"; cat "$dir/rdrop5.log"; exit 1; }
cmp -s "$dir/plain.safetensors" "$dir/rdrop5.safetensors" && { echo "--rdrop-alpha 5 trained the same model"; exit 1; }
cmp -s "$dir/rdrop5.safetensors" "$dir/rdrop5again.safetensors" ||
  { echo "--rdrop-alpha 5 twice with one seed: different models"; exit 1; }
"$anuvad" "${train[@]}" -t "$corpus" --rdrop-alpha -1 -m "$dir/neg.safetensors" > "$dir/neg.log" 2>&1 &&
  { echo "--rdrop-alpha -1 was accepted"; exit 1; }
grep -q "rdrop-alpha" "$dir/neg.log" || { cat "$dir/neg.log"; exit 1; }
echo "R-Drop: alpha 0 = off byte for byte, alpha 5 another model, reproducible"
# --layer-dropout: 0 is off byte for byte; 0.3 trains another model, reproducibly, and says so.
cmp -s "$dir/plain.safetensors" "$dir/layer0.safetensors" || { echo "--layer-dropout 0 changed the model"; exit 1; }
grep -q "layer dropout 0.3" "$dir/layer3.log" || { echo "no layer dropout in the log"; cat "$dir/layer3.log"; exit 1; }
cmp -s "$dir/plain.safetensors" "$dir/layer3.safetensors" && { echo "--layer-dropout 0.3 trained the same model"; exit 1; }
cmp -s "$dir/layer3.safetensors" "$dir/layer3again.safetensors" ||
  { echo "--layer-dropout 0.3 twice with one seed: different models"; exit 1; }
"$anuvad" "${train[@]}" -t "$corpus" --layer-dropout 1 -m "$dir/ld1.safetensors" > "$dir/ld1.log" 2>&1 &&
  { echo "--layer-dropout 1 was accepted"; exit 1; }
grep -q -- "--layer-dropout: Value 1 not in range" "$dir/ld1.log" || { cat "$dir/ld1.log"; exit 1; }
echo "layer dropout: 0 = off byte for byte, 0.3 another model, reproducible"
# --lr-decay: said in the log (without validations it never fires: the plain model); 1 refused.
grep -q "lr decay x0.5 per 4 stalled validations" "$dir/lrdecay.log" || { cat "$dir/lrdecay.log"; exit 1; }
cmp -s "$dir/plain.safetensors" "$dir/lrdecay.safetensors" || { echo "--lr-decay without validations changed the model"; exit 1; }
"$anuvad" "${train[@]}" -t "$corpus" --lr-decay 1 -m "$dir/lr1.safetensors" > "$dir/lr1.log" 2>&1 &&
  { echo "--lr-decay 1 was accepted"; exit 1; }
grep -q -- "--lr-decay: Value 1 not in range" "$dir/lr1.log" || { cat "$dir/lr1.log"; exit 1; }
echo "lr decay: logged, refused at 1"
