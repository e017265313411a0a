#!/usr/bin/env bash
# The ways a terminal, a pipe or a job manager ends a training run, and resuming after them:
#  1. `anuvad train ... 2>&1 | head -1`: the log reader goes away at once; training must still
#     finish (exit 0) and write the model (SIGPIPE ignored, failed log writes ignored);
#  2. SIGHUP (terminal closed) mid-run: exit 130 with a checkpoint, like SIGINT/SIGTERM;
#  3. a corpus line changed under the same path before the rerun: exit 1 with one line naming
#     the file and --no-resume, the checkpoint left byte-identical;
#  4. a copy of the checkpoint resumed with --after-steps below its step: no further update, the
#     run ends at once at the checkpoint's step with the final model written;
#  5. the corpus restored, the rerun resumes and ends byte-identical to an uninterrupted run.
# Usage: signals.sh ANUVAD CORPUS.tsv CONFIG.json
set -uo pipefail
anuvad=$1 config=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp "$2" "$dir/corpus.tsv"
corpus=$dir/corpus.tsv
args=(train --train-sets "$corpus" --no-valid -c "$config" --batch-tokens 60 --cpu-threads 2 -q --disp-freq 1)
fail() { echo "$1"; [ -n "${2:-}" ] && cat "$2"; exit 1; }
wait_for_step() {  # log, step
  for _ in $(seq 1 6000); do
    grep -q "step $2 " "$1" 2>/dev/null && return 0
    sleep 0.01
  done
  fail "training never reached step $2" "$1"
}

# 1. The log pipe closes after the first line.
"$anuvad" "${args[@]}" --after-epochs 5 -m "$dir/pipe.safetensors" 2>&1 | head -1 > "$dir/head.txt"
codes=("${PIPESTATUS[@]}")
[ "${codes[0]}" -eq 0 ] || fail "train | head -1: anuvad exit ${codes[0]}, expected 0"
[ -s "$dir/pipe.safetensors" ] || fail "train | head -1: no model written"
[ ! -e "$dir/pipe.checkpoint.safetensors" ] || fail "train | head -1: checkpoint left behind"
[ "$(wc -l < "$dir/head.txt")" -eq 1 ] || fail "head did not get its line" "$dir/head.txt"
echo "train 2>&1 | head -1: exit 0, model written"

long=(--after-epochs 60)
"$anuvad" "${args[@]}" "${long[@]}" -m "$dir/a.safetensors" > "$dir/a.log" 2>&1 || fail "run A failed" "$dir/a.log"

# 2. SIGHUP mid-run.
"$anuvad" "${args[@]}" "${long[@]}" -m "$dir/b.safetensors" > "$dir/b1.log" 2>&1 &
pid=$!
wait_for_step "$dir/b1.log" 40
kill -HUP $pid
wait $pid
code=$?
[ $code -eq 130 ] || fail "SIGHUP: exit code $code, expected 130" "$dir/b1.log"
ckpt=$dir/b.checkpoint.safetensors
[ -f "$ckpt" ] || fail "SIGHUP left no checkpoint"
step=$(grep -o 'interrupted after step [0-9]*' "$dir/b1.log" | grep -o '[0-9]*$')
[ -n "$step" ] || fail "no interruption message" "$dir/b1.log"
cp "$ckpt" "$dir/saved.checkpoint"
[ -s "$dir/b.safetensors" ] || fail "SIGHUP: no usable model at -m"
"$anuvad" translate -m "$dir/b.safetensors" "Hello." > /dev/null || fail "SIGHUP: the model at -m does not load"
cp "$dir/b.safetensors" "$dir/saved.model"

# 3. One corpus line changed: refused, checkpoint intact.
cp "$corpus" "$dir/corpus.orig"
sed -i '3s/^./X/' "$corpus"
cmp -s "$corpus" "$dir/corpus.orig" && fail "the test did not change the corpus"
"$anuvad" "${args[@]}" "${long[@]}" -m "$dir/b.safetensors" > "$dir/b2.log" 2>&1
code=$?
[ $code -eq 1 ] || fail "changed corpus: exit $code, expected 1" "$dir/b2.log"
[ "$(grep -c "corpus.tsv: changed since the checkpoint .*--no-resume" "$dir/b2.log")" -eq 1 ] ||
  fail "changed corpus: no one-line message naming the file and --no-resume" "$dir/b2.log"
cmp -s "$ckpt" "$dir/saved.checkpoint" || fail "changed corpus: the checkpoint was modified"
cmp -s "$dir/b.safetensors" "$dir/saved.model" || fail "changed corpus: the model was modified"
echo "changed corpus: $(grep -o 'corpus.tsv: changed.*' "$dir/b2.log")"
cp "$dir/corpus.orig" "$corpus"

# 4. A stopping limit below the checkpoint's step: the run ends at once at that step.
cp "$ckpt" "$dir/d.checkpoint.safetensors"
"$anuvad" "${args[@]}" --after-epochs 60 --after-steps 10 -m "$dir/d.safetensors" > "$dir/d.log" 2>&1 ||
  fail "resume with --after-steps 10 failed" "$dir/d.log"
grep -q "resuming from .* at step $step " "$dir/d.log" || fail "--after-steps 10: did not resume" "$dir/d.log"
grep -q "done: .* $step steps" "$dir/d.log" || fail "--after-steps 10: did not end at step $step" "$dir/d.log"
grep -q "step $((step + 1)) " "$dir/d.log" && fail "--after-steps 10: made another update" "$dir/d.log"
[ -s "$dir/d.safetensors" ] || fail "--after-steps 10: no model written"
[ ! -e "$dir/d.checkpoint.safetensors" ] || fail "--after-steps 10: checkpoint not removed"
echo "checkpoint at step $step resumed with --after-steps 10: ended at step $step, model written"

# 5. Corpus restored: resumes to the uninterrupted model.
"$anuvad" "${args[@]}" "${long[@]}" -m "$dir/b.safetensors" > "$dir/b3.log" 2>&1 || fail "rerun failed" "$dir/b3.log"
grep -q "resuming from" "$dir/b3.log" || fail "the rerun did not resume" "$dir/b3.log"
cmp "$dir/a.safetensors" "$dir/b.safetensors" || fail "resumed model differs from the uninterrupted one"
echo "SIGHUP after step $step, then resumed: model identical to the uninterrupted run"
