#!/usr/bin/env bash
# Interruption and resume, end to end, with real signals, dropout on and several batches per
# epoch (so the data position and both generator states must be restored):
#  1. an uninterrupted run A (250 epochs of 6 batches, long enough that the signals below always
#     land mid-training);
#  2. run B gets SIGINT (or $RESUME_SIGNAL, e.g. TERM) mid-training: it must exit 130 leaving a
#     checkpoint, and rerunning the same command must finish with a model byte-identical to A's;
#  3. run C (checkpoint every 5 updates) gets SIGKILL mid-training: the last checkpoint must
#     still load, and rerunning with --resume must again finish byte-identical to A;
#  0. first of all, --resume without a checkpoint must fail cleanly.
# Where in an epoch each rerun resumed is printed; training_run_test checks a resume that is certainly
# mid-epoch in process.
# Usage: [RESUME_SIGNAL=INT|TERM] resume.sh ANUVAD CORPUS.tsv CONFIG.json [EXTRA TRAIN FLAGS...]
set -uo pipefail
anuvad=$1 corpus=$2 config=$3
signal=${RESUME_SIGNAL:-INT}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed 's/"dropout": *[0-9.]*/"dropout": 0.1/' "$config" > "$dir/config.json"
grep -q '"dropout": 0.1' "$dir/config.json" || { echo "$config: no dropout key to turn on"; exit 1; }
args=(train --train-sets "$corpus" --no-valid -c "$dir/config.json" --batch-tokens 60 --after-epochs 250
      --cpu-threads 2 -q --disp-freq 1 "${@:4}")
wait_for_step() {  # log, step
  for _ in $(seq 1 6000); do
    grep -q "step $2 " "$1" 2>/dev/null && return 0
    sleep 0.01
  done
  echo "training never reached step $2"; cat "$1"; exit 1
}
# --resume demands a checkpoint: none here, so a one-line error and exit 1, nothing written.
"$anuvad" "${args[@]}" --resume -m "$dir/none.safetensors" > "$dir/none.log" 2>&1
code=$?
[ $code -eq 1 ] && grep -q "no checkpoint to resume from" "$dir/none.log" && [ ! -e "$dir/none.safetensors" ] ||
  { echo "--resume without a checkpoint: exit $code"; cat "$dir/none.log"; exit 1; }

"$anuvad" "${args[@]}" -m "$dir/a.safetensors" > "$dir/a.log" 2>&1 || { cat "$dir/a.log"; exit 1; }

"$anuvad" "${args[@]}" -m "$dir/b.safetensors" > "$dir/b1.log" 2>&1 &
pid=$!
wait_for_step "$dir/b1.log" 40
kill -"$signal" $pid
wait $pid
code=$?
[ $code -eq 130 ] || { echo "SIG$signal: exit code $code, expected 130"; cat "$dir/b1.log"; exit 1; }
[ -f "$dir/b.checkpoint.safetensors" ] || { echo "SIG$signal left no checkpoint"; exit 1; }
grep -q "interrupted after step" "$dir/b1.log" || { echo "no interruption message"; exit 1; }
"$anuvad" "${args[@]}" -m "$dir/b.safetensors" > "$dir/b2.log" 2>&1 || { cat "$dir/b2.log"; exit 1; }
grep -q "resuming from" "$dir/b2.log" || { echo "the rerun did not resume"; cat "$dir/b2.log"; exit 1; }
cmp "$dir/a.safetensors" "$dir/b.safetensors" || { echo "resumed model differs from the uninterrupted one"; exit 1; }
[ ! -f "$dir/b.checkpoint.safetensors" ] || { echo "checkpoint not removed after completion"; exit 1; }
echo "SIG$signal, then $(grep -o 'resuming from .*' "$dir/b2.log"): resumed model identical"

"$anuvad" "${args[@]}" --save-freq 5 -m "$dir/c.safetensors" > "$dir/c1.log" 2>&1 &
pid=$!
wait_for_step "$dir/c1.log" 53
kill -KILL $pid
wait $pid 2>/dev/null
[ -f "$dir/c.checkpoint.safetensors" ] || { echo "SIGKILL: no checkpoint"; exit 1; }
ls "$dir" | grep -q '\.tmp\.' && echo "(a temporary file of the killed write was left behind; it is ignored)"
"$anuvad" "${args[@]}" --save-freq 5 --resume -m "$dir/c.safetensors" > "$dir/c2.log" 2>&1 || { cat "$dir/c2.log"; exit 1; }
grep -q "resuming from" "$dir/c2.log" || { echo "the rerun after SIGKILL did not resume"; exit 1; }
cmp "$dir/a.safetensors" "$dir/c.safetensors" || { echo "model resumed after SIGKILL differs"; exit 1; }
echo "SIGKILL after step 53, then $(grep -o 'resuming from .*' "$dir/c2.log"): model identical"
