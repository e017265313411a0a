#!/usr/bin/env bash
# --final-model average: the run keeps the K best models of its first validation metric as
# <stem>.best-chrf.1.safetensors (best) … .K, ranked by their valid_score metadata, and writes
# their element-wise mean to -m (every tensor equal to the float32 of the mean in double) with
# the metadata averaged_from; with fewer validations than K it averages those there are. An
# interrupted run (SIGINT) leaves the average of the models kept so far at -m.
# Usage: average_best.sh ANUVAD CORPUS.tsv CONFIG.json
set -uo pipefail
anuvad=$1 corpus=$2 config=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
train=(train --train-sets "$corpus" --valid-sets "$corpus" -c "$config" --src-vocab-size 60
       --tgt-vocab-size 80 --valid-freq 1 --valid-metrics chrf cross-entropy
       --seed 3 --cpu-threads 1 -q --disp-freq 0 --no-resume --final-model average)
"$anuvad" "${train[@]}" --after-epochs 8 --average-best 3 -m "$dir/k3.safetensors" > "$dir/k3.log" 2>&1 ||
  { cat "$dir/k3.log"; exit 1; }
"$anuvad" "${train[@]}" --after-epochs 2 --average-best 500 -m "$dir/many.safetensors" > "$dir/many.log" 2>&1 ||
  { cat "$dir/many.log"; exit 1; }
grep -q "saved model to $dir/k3.safetensors (the average of the 3 best dev chrf models" "$dir/k3.log" ||
  { echo "no log line naming the average"; cat "$dir/k3.log"; exit 1; }
n_valid=$(grep -c 'valid step' "$dir/many.log")
python3 - "$dir" "$n_valid" <<'PY' || exit 1
import json, os, struct, sys
def read(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__")
    body = data[8 + n:]
    return meta, {k: body[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in header.items()}
d, n_valid = sys.argv[1], int(sys.argv[2])
kept = [f"{d}/k3.best-chrf.{r}.safetensors" for r in (1, 2, 3)]
assert not os.path.exists(f"{d}/k3.best-chrf.4.safetensors"), "more than K models kept"
models = [read(p) for p in kept]
scores = [float(m["valid_score"]) for m, _ in models]
assert scores == sorted(scores, reverse=True), f"ranks not in chrF order: {scores}"
meta, avg = read(f"{d}/k3.safetensors")
assert json.loads(meta["averaged_from"]) == kept, meta["averaged_from"]
assert meta["final_model"] == "average-best-chrf", meta["final_model"]
differ = False
for name, blob in avg.items():
    if name.startswith("tokenizer."):  # the SentencePiece models are copied
        continue
    parts = [struct.unpack(f"<{len(b[name]) // 4}f", b[name]) for _, b in models]
    mean = struct.pack(f"<{len(parts[0])}f", *[sum(v) / 3 for v in zip(*parts)])
    assert blob == mean, f"{name}: not the mean of the 3 kept models"
    differ |= blob != models[0][1][name]
assert differ, "the average equals the best model: nothing was averaged"
many_meta, _ = read(f"{d}/many.safetensors")
got = len(json.loads(many_meta["averaged_from"]))
assert 0 < got <= n_valid and got == len([f for f in os.listdir(d) if f.startswith("many.best-chrf.") and f[15:-12].isdigit()]), (got, n_valid)
print(f"-m = mean of the 3 best; --average-best 500 averaged the {got} models of {n_valid} validations")
PY
# SIGINT after a few validations: -m holds the average of the models kept so far, and loads.
"$anuvad" "${train[@]}" --after-epochs 100000 -m "$dir/int.safetensors" > "$dir/int.log" 2>&1 &
pid=$!
for _ in $(seq 300); do grep -q "valid step 3 " "$dir/int.log" && break; sleep 0.1; done
kill -INT $pid
wait $pid
code=$?
[ $code -eq 130 ] || { echo "SIGINT: exit $code, expected 130"; cat "$dir/int.log"; exit 1; }
grep -q "saved model to $dir/int.safetensors (the average of the" "$dir/int.log" ||
  { echo "SIGINT: -m is not the average"; cat "$dir/int.log"; exit 1; }
"$anuvad" translate -m "$dir/int.safetensors" "Hello." > /dev/null || { echo "SIGINT: -m does not load"; exit 1; }
echo "interrupted run: the average at -m loads"
