#!/usr/bin/env bash
# Translation quality on real data, end to end, with each preset's own defaults (no recipe flags):
# train, then `anuvad evaluate` greedy and beam 4 of the model the run leaves at -m.
#   1. the bundled corpus: `anuvad train` as the README runs it (preset tiny; data/train.tsv,
#      validated on data/dev.tsv), reported on data/test.tsv;
#   2. Tatoeba hin-eng (../shared/corpora/tatoeba-hin-eng/, never copied into the repository):
#      `anuvad train --preset small -t train.tsv --valid-sets dev.tsv`, reported on dev.tsv
#      (there is no test split, so the Tatoeba figures are dev figures: the split the preset's
#      best-chrF model was chosen on). Skipped with a message when the folder is absent.
# Prints a markdown table (corpus, preset, training, training time, chrF2 / BLEU / exact match
# greedy and beam 4, greedy exact match on the training pairs) and, per run, the dev curve (step, epoch, dev metrics per validation).
# Nothing is tuned on a test split.
#
# Usage: tests/quality/run_quality.sh [ANUVAD]          (from anywhere; default build/anuvad)
# Environment (defaults in brackets):
#   OUT                 work folder for models and logs [/tmp/anuvad-quality]
#   THREADS             --cpu-threads [2]
#   TATOEBA_DIR         [<repo>/../shared/corpora/tatoeba-hin-eng]
#   BUNDLED_PRESET [tiny]   TATOEBA_PRESET [small]
#   BUNDLED_FLAGS / TATOEBA_FLAGS  extra `anuvad train` flags for ablations (none by default)
#   SKIP_BUNDLED=1 / SKIP_TATOEBA=1
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
anuvad=$(realpath "${1:-$repo/build/anuvad}")
out=${OUT:-/tmp/anuvad-quality}
threads=${THREADS:-2}
tatoeba=${TATOEBA_DIR:-$repo/../shared/corpora/tatoeba-hin-eng}
mkdir -p "$out"
[ -x "$anuvad" ] || { echo "no anuvad executable at $anuvad (build it first)"; exit 1; }

rows=()
curves=()

# run NAME PRESET TRAIN VALID REPORT EXTRA_FLAGS
run() {
  local name=$1 preset=$2 train=$3 valid=$4 report=$5 extra=$6
  local model="$out/$name.safetensors" log="$out/$name.train.log"
  rm -f "$out/$name".*safetensors "$out/$name".log.jsonl
  echo "== $name: training (preset $preset ${extra:+$extra }, $threads threads; log $log)" >&2
  local t0 t1
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  "$anuvad" train --no-resume --preset "$preset" -t "$train" --valid-sets "$valid" -m "$model" \
    --cpu-threads "$threads" $extra > "$log" 2>&1 || { cat "$log" >&2; exit 1; }
  t1=$(date +%s.%N)
  local secs
  secs=$(python3 -c "print(f'{$t1 - $t0:.0f}')")
  local g b
  g=$("$anuvad" evaluate -m "$model" --test "$report" --cpu-threads "$threads" --json)
  b=$("$anuvad" evaluate -m "$model" --test "$report" --cpu-threads "$threads" --json -b 4)
  local exact  # greedy exact match on the training pairs: how well it learnt what it saw
  exact=$("$anuvad" evaluate -m "$model" --test "$train" --cpu-threads "$threads" --json |
          python3 -c "import json,sys; print(f\"{json.load(sys.stdin)['exact_match']['percent']:.1f}\")")
  rows+=("$(python3 "$repo/tests/quality/quality_row.py" row "$name" "$preset" "$secs" \
            "$(basename "$report")" "$extra" "$g" "$b" "$out/$name.log.jsonl" "$exact")")
  curves+=("$(python3 "$repo/tests/quality/quality_row.py" curve "$name" "$out/$name.log.jsonl")")
}

if [ "${SKIP_BUNDLED:-0}" != 1 ]; then
  run bundled "${BUNDLED_PRESET:-tiny}" "$repo/data/train.tsv" "$repo/data/dev.tsv" "$repo/data/test.tsv" "${BUNDLED_FLAGS:-}"
fi
if [ "${SKIP_TATOEBA:-0}" != 1 ]; then
  if [ -f "$tatoeba/train.tsv" ] && [ -f "$tatoeba/dev.tsv" ]; then
    run tatoeba "${TATOEBA_PRESET:-small}" "$tatoeba/train.tsv" "$tatoeba/dev.tsv" "$tatoeba/dev.tsv" "${TATOEBA_FLAGS:-}"
  else
    echo "SKIP tatoeba: $tatoeba/train.tsv and dev.tsv not found (Tatoeba hin-eng is not part of this repository)" >&2
  fi
fi

echo
echo "Machine: $(nproc) cores, --cpu-threads $threads, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; anuvad $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')"
# The kernel changes the training time and, through rounding, the trajectory (README: a forced
# OPENBLAS_CORETYPE=Haswell gave another dev curve and 1.5x the time of OpenBLAS's own choice).
"$anuvad" --version | grep '^BLAS: ' || true
echo
echo "| run | preset | training | training time | reported on | greedy chrF2 / BLEU / exact % | beam 4 chrF2 / BLEU / exact % | exact % on its training pairs (greedy) |"
echo "|---|---|---|---|---|---|---|---|"
for r in "${rows[@]}"; do echo "$r"; done
for c in "${curves[@]}"; do echo "$c"; done
