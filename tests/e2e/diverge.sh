#!/usr/bin/env bash
# A diverging run (learning rate 1e30: the first update blows the weights up to ~1e27, the
# second loss overflows) must stop with exit status 1 and a one-line error naming the step,
# write no model, and keep the last good checkpoint: rerunning the same command resumes from
# it (so it is complete and loadable) and stops at the same step again.
# Usage: diverge.sh ANUVAD CORPUS.tsv CONFIG.json
set -uo pipefail
anuvad=$1 corpus=$2 config=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
args=(train --train-sets "$corpus" --no-valid -c "$config" --after-epochs 50 --learning-rate 1e30
      --save-freq 1 --cpu-threads 2 -m "$dir/m.safetensors")
for run in 1 2; do
  "$anuvad" "${args[@]}" > "$dir/$run.log" 2>&1
  code=$?
  [ $code -eq 1 ] || { echo "run $run: exit status $code, expected 1"; cat "$dir/$run.log"; exit 1; }
  grep -q "anuvad: error: step 2: training loss is NaN or Inf" "$dir/$run.log" ||
    { echo "run $run: no error naming step 2"; cat "$dir/$run.log"; exit 1; }
  [ ! -e "$dir/m.safetensors" ] || { echo "run $run wrote a model"; exit 1; }
  [ -f "$dir/m.checkpoint.safetensors" ] || { echo "run $run: the step-1 checkpoint is gone"; exit 1; }
done
grep -q "resuming from .* at step 1 " "$dir/2.log" || { echo "the rerun did not resume from step 1"; cat "$dir/2.log"; exit 1; }
echo "stopped at step 2 twice; the step-1 checkpoint resumed"

# Learning rate 1e45: the first update itself makes weights Inf while its loss and gradients
# were finite; the weight check before the step-1 checkpoint must stop it, writing nothing.
"$anuvad" train --train-sets "$corpus" --no-valid -c "$config" --after-epochs 50 --learning-rate 1e45 \
  --save-freq 1 --cpu-threads 2 -m "$dir/inf.safetensors" > "$dir/inf.log" 2>&1
code=$?
[ $code -eq 1 ] && grep -q "anuvad: error: step 1: weight .* is NaN or Inf" "$dir/inf.log" ||
  { echo "lr 1e45: exit status $code, expected 1 naming a weight at step 1"; cat "$dir/inf.log"; exit 1; }
[ ! -e "$dir/inf.safetensors" ] && [ ! -e "$dir/inf.checkpoint.safetensors" ] ||
  { echo "lr 1e45: a model or checkpoint with Inf weights was written"; ls "$dir"; exit 1; }
echo "Inf weights after step 1: stopped before writing any checkpoint"
