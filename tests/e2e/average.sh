#!/usr/bin/env bash
# `anuvad average`: the average of a model with itself is that model (every weight bit for bit),
# the average of two runs is the element-wise mean of their weights, and models of another
# config are refused with a message naming the file.
# Usage: average.sh ANUVAD CORPUS.tsv CONFIG.json
set -uo pipefail
anuvad=$1 corpus=$2 config=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
train=(train --train-sets "$corpus" --no-valid -c "$config" --after-epochs 2 --cpu-threads 1 -q --disp-freq 0)
"$anuvad" "${train[@]}" --seed 1 -m "$dir/a.safetensors" > "$dir/a.log" 2>&1 || { cat "$dir/a.log"; exit 1; }
"$anuvad" "${train[@]}" --seed 2 -m "$dir/b.safetensors" > "$dir/b.log" 2>&1 || { cat "$dir/b.log"; exit 1; }
"$anuvad" "${train[@]}" --seed 1 --dim-emb 16 -m "$dir/c.safetensors" > "$dir/c.log" 2>&1 || { cat "$dir/c.log"; exit 1; }
"$anuvad" average -o "$dir/aa.safetensors" "$dir/a.safetensors" "$dir/a.safetensors" || exit 1
"$anuvad" average -o "$dir/ab.safetensors" "$dir/a.safetensors" "$dir/b.safetensors" || exit 1
if "$anuvad" average -o "$dir/ac.safetensors" "$dir/a.safetensors" "$dir/c.safetensors" > "$dir/ac.log" 2>&1; then
  echo "averaging models of different configs succeeded"; exit 1
fi
grep -q "c.safetensors: config differs" "$dir/ac.log" || { echo "bad message:"; cat "$dir/ac.log"; exit 1; }
[ ! -e "$dir/ac.safetensors" ] || { echo "a refused average left a file"; exit 1; }
"$anuvad" translate -m "$dir/ab.safetensors" "How are you?" > /dev/null || { echo "averaged model does not load"; exit 1; }
python3 - "$dir" <<'PY' || exit 1
import json, struct, sys
def tensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__" or t["dtype"] != "F32":
            continue
        b, e = t["data_offsets"]
        out[name] = struct.unpack("<%df" % ((e - b) // 4), body[b:e])
    return out
d = sys.argv[1]
a, b = tensors(d + "/a.safetensors"), tensors(d + "/b.safetensors")
aa, ab = tensors(d + "/aa.safetensors"), tensors(d + "/ab.safetensors")
assert set(a) == set(aa) == set(ab) and a, "tensor names differ"
assert aa == a, "average of a model with itself differs from the model"
differ = 0
for name in a:
    for x, y, m in zip(a[name], b[name], ab[name]):
        want = struct.unpack("<f", struct.pack("<f", (x + y) / 2))[0]
        assert m == want, f"{name}: {m} is not the mean of {x} and {y}"
        differ += x != y
assert differ > 0, "the two runs have identical weights: the test proves nothing"
print(f"average of a with itself identical; a+b is the mean ({differ} weights differ between a and b)")
PY
