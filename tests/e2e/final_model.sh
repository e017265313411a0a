#!/usr/bin/env bash
# --final-model: `best` leaves at -m the weights of <stem>.best-<first metric>.safetensors (every
# tensor byte for byte), `last` the last weights, which differ from them in a run whose best chrF
# came before its last update (checked from the log, so the test cannot pass by accident).
# An interrupted run (SIGINT) leaves a model at -m that loads.
# Usage: final_model.sh ANUVAD CORPUS.tsv CONFIG.json
set -uo pipefail
anuvad=$1 corpus=$2 config=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
train=(train --train-sets "$corpus" --valid-sets "$corpus" -c "$config" --src-vocab-size 60
       --tgt-vocab-size 80 --valid-freq 1 --valid-metrics chrf cross-entropy
       --seed 3 --cpu-threads 1 -q --disp-freq 0 --no-resume)
for which in best last; do
  "$anuvad" "${train[@]}" --after-epochs 12 --final-model $which -m "$dir/$which.safetensors" > "$dir/$which.log" 2>&1 ||
    { cat "$dir/$which.log"; exit 1; }
done
best_step=$(grep -o 'valid step [0-9]* | chrf .*new best: chrf' "$dir/best.log" | tail -1 | grep -o 'step [0-9]*' | grep -o '[0-9]*')
last_step=$(grep -o 'valid step [0-9]*' "$dir/best.log" | tail -1 | grep -o '[0-9]*')
echo "best chrF at step $best_step of $last_step"
[ -n "$best_step" ] && [ "$best_step" -lt "$last_step" ] ||
  { echo "precondition: the best chrF must come before the last update"; cat "$dir/best.log"; exit 1; }
grep -q "saved model to $dir/best.safetensors (the best dev chrf" "$dir/best.log" ||
  { echo "no log line naming the best model"; cat "$dir/best.log"; exit 1; }
python3 - "$dir" <<'PY' || exit 1
import json, struct, sys
def read(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__")
    body = data[8 + n:]
    return meta, {k: body[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in header.items()}
d = sys.argv[1]
best_meta, best = read(f"{d}/best.safetensors")
_, kept = read(f"{d}/best.best-chrf.safetensors")
last_meta, last = read(f"{d}/last.safetensors")
assert best == kept, "--final-model best: -m is not the best-chrf model"
assert best_meta["final_model"] == "best-chrf", best_meta["final_model"]
assert last_meta["final_model"] == "last", last_meta["final_model"]
assert last != kept, "--final-model last: -m equals the best-chrf model"
print("best = best-chrf tensors; last differs")
PY
# SIGINT after a few updates: a usable model at -m besides the checkpoint.
"$anuvad" "${train[@]}" --after-epochs 100000 --final-model best -m "$dir/int.safetensors" > "$dir/int.log" 2>&1 &
pid=$!
for _ in $(seq 300); do grep -q "valid step 3 " "$dir/int.log" && break; sleep 0.1; done
kill -INT $pid
wait $pid
code=$?
[ $code -eq 130 ] || { echo "SIGINT: exit $code, expected 130"; cat "$dir/int.log"; exit 1; }
[ -f "$dir/int.checkpoint.safetensors" ] || { echo "SIGINT: no checkpoint"; exit 1; }
"$anuvad" translate -m "$dir/int.safetensors" "Hello." > /dev/null || { echo "SIGINT: -m does not load"; exit 1; }
echo "interrupted run: model at -m loads"
