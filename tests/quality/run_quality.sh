#!/usr/bin/env bash
# Translation quality on real data, end to end: train, then `anuvad evaluate` greedy and beam 4.
#   1. the bundled corpus: data/train.tsv, validated on data/dev.tsv, reported on data/test.tsv;
#   2. Tatoeba hin-eng (../shared/corpora/tatoeba-hin-eng/, never copied into the repository):
#      train.tsv, validated and reported on dev.tsv (there is no test split; so the Tatoeba
#      figures are dev figures, the same split the best checkpoint was chosen on). Skipped with
#      a message when the folder is absent.
# Prints a markdown table (corpus, preset, training time, chrF2 / BLEU / exact match, greedy and
# beam 4) and, per run, the dev curve (step, epoch, dev chrF2, dev cross-entropy per validation).
# Nothing is tuned on a test split: the evaluated model is <stem>.best-chrf (best dev chrF2).
#
# Usage: tests/quality/run_quality.sh [ANUVAD]          (from anywhere; default build/anuvad)
# Environment (defaults in brackets):
#   OUT                 work folder for models and logs [/tmp/anuvad-quality]
#   THREADS             --cpu-threads [2]
#   TATOEBA_DIR         [<repo>/../shared/corpora/tatoeba-hin-eng]
#   BUNDLED_PRESET      [tiny]     BUNDLED_EPOCHS  [60]   BUNDLED_VALID_FREQ  [500]
#   TATOEBA_PRESET      [small]    TATOEBA_EPOCHS  [40]   TATOEBA_VALID_FREQ  [100]
#   BUNDLED_FLAGS / TATOEBA_FLAGS  extra `anuvad train` flags (e.g. "--exponential-smoothing")
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

# run NAME PRESET EPOCHS VALID_FREQ TRAIN VALID REPORT EXTRA_FLAGS
run() {
  local name=$1 preset=$2 epochs=$3 freq=$4 train=$5 valid=$6 report=$7 extra=$8
  local model="$out/$name.safetensors" log="$out/$name.train.log"
  rm -f "$out/$name".*safetensors
  echo "== $name: training (preset $preset, $epochs epochs, $threads threads; log $log)" >&2
  local t0 t1
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  "$anuvad" train -q --no-resume --preset "$preset" -t "$train" --valid-sets "$valid" -m "$model" \
    --after-epochs "$epochs" --valid-metrics chrf cross-entropy --valid-freq "$freq" \
    --disp-freq "$freq" --cpu-threads "$threads" --save-freq 0 $extra > "$log" 2>&1 ||
    { cat "$log" >&2; exit 1; }
  t1=$(date +%s.%N)
  local secs
  secs=$(python3 -c "print(f'{$t1 - $t0:.0f}')")
  local best
  best=$(dirname "$model")/$(basename "$model" .safetensors).best-chrf.safetensors
  local g b
  g=$("$anuvad" evaluate -m "$best" --test "$report" --cpu-threads "$threads" --json)
  b=$("$anuvad" evaluate -m "$best" --test "$report" --cpu-threads "$threads" --json -b 4)
  rows+=("$(python3 - "$name" "$preset" "$epochs" "$secs" "$(basename "$report")" "$extra" "$g" "$b" "$log" <<'PY'
import json, re, sys
name, preset, epochs, secs, report, extra, g, b, log = sys.argv[1:]
g, b = json.loads(g), json.loads(b)
steps = re.findall(r"done: (\d+) epochs, (\d+) steps", open(log).read())
st = steps[-1][1] if steps else "?"
flags = f" {extra}" if extra.strip() else ""
m, s = divmod(int(secs), 60)
print(f"| {name} | {preset}{flags} | {epochs} ep / {st} steps | {m}:{s:02d} | {report} | "
      f"{g['chrf']['score']:.1f} / {g['bleu']['score']:.1f} / {g['exact_match']['percent']:.1f} | "
      f"{b['chrf']['score']:.1f} / {b['bleu']['score']:.1f} / {b['exact_match']['percent']:.1f} |")
PY
)")
  curves+=("$(python3 - "$name" "$log" <<'PY'
import re, sys
name, log = sys.argv[1:]
epoch = {}
lines = ["", f"Dev curve of {name} (greedy chrF2 of the dev set at each validation):", "",
         "| step | epoch | dev chrF2 | dev cross-entropy (nats/token) |", "|---|---|---|---|"]
last_epoch = "?"
for l in open(log):
    m = re.search(r"epoch (\d+) \| step (\d+) ", l)
    if m:
        last_epoch = m.group(1)
    m = re.search(r"valid step (\d+) \| chrf ([\d.]+) \| cross-entropy ([\d.]+)", l)
    if m:
        star = " *" if "new best" in l and "chrf" in l.split("new best")[1] else ""
        lines.append(f"| {m.group(1)} | {last_epoch} | {m.group(2)}{star} | {m.group(3)} |")
m = re.search(r"done: (\d+) epochs, (\d+) steps in ([\d.]+) s, (\d+) target tokens/s", open(log).read())
if m and lines[-1].startswith(f"| {m.group(2)} | "):  # the final validation: epoch of the end
    cells = lines[-1].split(" | ")
    cells[1] = m.group(1)
    lines[-1] = " | ".join(cells)
if m:
    lines.append("")
    lines.append(f"{m.group(1)} epochs, {m.group(2)} steps in {m.group(3)} s, {m.group(4)} target tokens/s; * = new best dev chrF2 (the evaluated model)")
print("\n".join(lines))
PY
)")
}

if [ "${SKIP_BUNDLED:-0}" != 1 ]; then
  run bundled "${BUNDLED_PRESET:-tiny}" "${BUNDLED_EPOCHS:-60}" "${BUNDLED_VALID_FREQ:-500}" \
      "$repo/data/train.tsv" "$repo/data/dev.tsv" "$repo/data/test.tsv" "${BUNDLED_FLAGS:-}"
fi
if [ "${SKIP_TATOEBA:-0}" != 1 ]; then
  if [ -f "$tatoeba/train.tsv" ] && [ -f "$tatoeba/dev.tsv" ]; then
    run tatoeba "${TATOEBA_PRESET:-small}" "${TATOEBA_EPOCHS:-40}" "${TATOEBA_VALID_FREQ:-100}" \
        "$tatoeba/train.tsv" "$tatoeba/dev.tsv" "$tatoeba/dev.tsv" "${TATOEBA_FLAGS:-}"
  else
    echo "SKIP tatoeba: $tatoeba/train.tsv and dev.tsv not found (Tatoeba hin-eng is not part of this repository)" >&2
  fi
fi

echo
echo "Machine: $(nproc) cores, --cpu-threads $threads, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; anuvad $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo
echo "| run | preset | training | training time | reported on | greedy chrF2 / BLEU / exact % | beam 4 chrF2 / BLEU / exact % |"
echo "|---|---|---|---|---|---|---|"
for r in "${rows[@]}"; do echo "$r"; done
for c in "${curves[@]}"; do echo "$c"; done
