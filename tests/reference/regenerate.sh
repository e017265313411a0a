#!/usr/bin/env bash
# Regenerates the PyTorch reference fixtures of tests/reference_test.cpp:
#   tests/data/reference/model_{pre,post}.safetensors    tiny models, 20 training steps
#   tests/data/reference/fixture_{pre,post}.json         tests/reference/torch_reference.py
#
# Usage (from anywhere; builds nothing):
#   apt-get install -y python3-torch python3-numpy
#   bash tests/reference/regenerate.sh [path/to/anuvad]      (default: build/anuvad)
# Check the four files in afterwards. CI only reads them; it needs no torch.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
anuvad="$(realpath "${1:-build/anuvad}")"
[[ -x "$anuvad" ]] || { echo "regenerate.sh: no anuvad executable at $anuvad (build first)" >&2; exit 1; }
cd "$root"

out=tests/data/reference
mkdir -p "$out"
for x in pre post; do
  rm -f "$out/model_$x.safetensors" "$out/model_$x.best-cross-entropy.safetensors"
  "$anuvad" train -c "tests/reference/config_$x.json" --train-sets tests/reference/pairs.tsv \
    --no-valid --after-steps 20 --warmup-steps 5 --src-vocab-size 60 --tgt-vocab-size 60 \
    --seed 7 -q -m "$out/model_$x.safetensors"
  # Only a validating run writes a best-model file; never keep a stray one.
  rm -f "$out/model_$x.best-cross-entropy.safetensors"
done

/usr/bin/python3 tests/reference/torch_reference.py --models "$out" --out "$out"
ls -l "$out"
