#!/usr/bin/env bash
# Data-parallel training on one machine (issue #17): 1 rank × 2 threads against
# `mpirun -np 2` × 1 thread with each gradient allreduce mode (--allreduce fused: one
# MPI_Allreduce after the backward pass; overlap: buckets started during it, polled between
# layers; overlap-lazy: not polled), on the benchmark's tiny, small and base architectures
# (README.md of this folder; vocabularies 1000/1000, what the bundled corpus supports), training
# `anuvad train` on data/train.tsv with the same global batch (--batch-tokens) and steps. Each
# repeat runs every layout and mode once, in alternating order (reversed on even repeats), so
# that the machine's drifting load hits them alike. Reports per run the target tokens/s of the
# run's own summary and, with 2 ranks, the time per update waiting for the slower rank (the
# update's loss-totals allreduce) and in what is left of the gradient allreduce after it; then
# medians. Not a test: the figures depend on the machine and on its load (recorded per run).
# Usage: tests/bench/mpi_scaling.sh [--configs tiny,small,base] [--modes fused,overlap]
#          [--bucket-mb MB] [--steps N] [--repeats R] [--mpirun-args "ARGS"] [--out DIR]
#   --mpirun-args: extra mpirun arguments, e.g. "--mca mpi_yield_when_idle 1 --bind-to none".
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
configs=tiny,small modes=fused,overlap bucket_mb=2 steps=150 repeats=3 OUT="" mpirun_args=""
while [ $# -gt 0 ]; do
  case $1 in
    --configs) configs=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --bucket-mb) bucket_mb=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --mpirun-args) mpirun_args=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 1 ;;
  esac
done
ANUVAD=${ANUVAD:-$repo/build/anuvad}
[ -x "$ANUVAD" ] || { echo "no anuvad at $ANUVAD (cmake --build build first)" >&2; exit 1; }
"$ANUVAD" --version | grep -q "^MPI: Open MPI" || { echo "$ANUVAD is built without MPI" >&2; exit 1; }
OUT=${OUT:-$(mktemp -d /tmp/anuvad-mpi-bench.XXXXXX)}
mkdir -p "$OUT"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# shellcheck disable=SC2206
launch=(mpirun --oversubscribe -np 2 $mpirun_args)
[ "$(id -u)" -eq 0 ] && launch+=(--allow-run-as-root)

config_json() {  # name → the architecture of tests/bench (vocabulary sizes set by flags)
  case $1 in
    tiny) echo '{"d_model": 64, "n_heads": 4, "d_ff": 256, "encoder_layers": 2, "decoder_layers": 2, "dropout": 0.1}' ;;
    small) echo '{"d_model": 256, "n_heads": 4, "d_ff": 1024, "encoder_layers": 3, "decoder_layers": 3, "dropout": 0.1}' ;;
    base) echo '{"d_model": 512, "n_heads": 8, "d_ff": 2048, "encoder_layers": 6, "decoder_layers": 6, "dropout": 0.1}' ;;
    *) echo "unknown config $1" >&2; exit 1 ;;
  esac
}

results="$OUT/runs.tsv"
printf 'config\tlayout\trepeat\ttgt_tok_per_s\tallreduce_ms_per_update\twait_ms_per_update\tseconds\tparameters\tbuckets\tloadavg\n' > "$results"
layouts=(1x2)
for m in ${modes//,/ }; do layouts+=("2x1-$m"); done
for cfg in ${configs//,/ }; do
  config_json "$cfg" > "$OUT/$cfg.json"
  for r in $(seq 1 "$repeats"); do
    order=("${layouts[@]}")
    if [ $((r % 2)) -eq 0 ]; then order=(); for ((i = ${#layouts[@]} - 1; i >= 0; i--)); do order+=("${layouts[i]}"); done; fi
    for layout in "${order[@]}"; do
      args=(train --train-sets "$repo/data/train.tsv" --no-valid -c "$OUT/$cfg.json" --src-vocab-size 1000
            --tgt-vocab-size 1000 --batch-tokens 2000 --after-steps "$steps" --after-epochs 0 --save-freq 0
            --no-resume -q --disp-freq 0 -m "$OUT/$cfg-$layout.safetensors")
      log="$OUT/$cfg-$layout-$r.log"
      load=$(cut -d' ' -f1 /proc/loadavg)
      if [ "$layout" = 1x2 ]; then
        "$ANUVAD" "${args[@]}" --cpu-threads 2 > "$log" 2>&1
      else
        "${launch[@]}" "$ANUVAD" "${args[@]}" --cpu-threads 1 --allreduce "${layout#2x1-}" \
          --allreduce-bucket-mb "$bucket_mb" > "$log" 2>&1
      fi
      load="$load-$(cut -d' ' -f1 /proc/loadavg)"
      python3 - "$log" "$cfg" "$layout" "$r" "$load" >> "$results" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
done = re.search(r"done: .* in ([0-9.]+) s, ([0-9]+) target tokens/s", text)
ar = re.search(r"in ([0-9]+) bucket\(s\); per update ([0-9.]+) ms waiting for the slowest rank, ([0-9.]+) ms in the allreduce", text)
params = re.search(r"\| ([0-9]+) parameters \|", text)
if not done or not params:
    sys.exit(f"{sys.argv[1]}: no summary line")
print("\t".join([sys.argv[2], sys.argv[3], sys.argv[4], done.group(2), ar.group(3) if ar else "",
                 ar.group(2) if ar else "", done.group(1), params.group(1), ar.group(1) if ar else "",
                 sys.argv[5]]))
PY
    done
  done
done
python3 - "$results" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
print("median over repeats (the machine is shared: load average before-after each run in runs.tsv)")
print("config  layout           params    tgt tok/s  allreduce ms/update  wait ms/update  s/run")
for cfg in dict.fromkeys(r["config"] for r in rows):
    for layout in dict.fromkeys(r["layout"] for r in rows):
        rs = [r for r in rows if r["config"] == cfg and r["layout"] == layout]
        if not rs:
            continue
        tps = statistics.median(float(r["tgt_tok_per_s"]) for r in rs)
        ar = [float(r["allreduce_ms_per_update"]) for r in rs if r["allreduce_ms_per_update"]]
        wait = [float(r["wait_ms_per_update"]) for r in rs if r["wait_ms_per_update"]]
        sec = statistics.median(float(r["seconds"]) for r in rs)
        print(f"{cfg:7} {layout:16} {rs[0]['parameters']:>8}  {tps:9.0f}  {statistics.median(ar) if ar else float('nan'):19.2f}  {statistics.median(wait) if wait else float('nan'):14.2f}  {sec:5.1f}")
PY
echo "runs: $results"
