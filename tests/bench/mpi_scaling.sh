#!/usr/bin/env bash
# Data-parallel training on one machine (issue #17): 1 rank × 2 threads against
# `mpirun -np 2` × 1 thread, on the benchmark's tiny and small architectures (README.md of this
# folder; vocabularies 1000/1000, what the bundled corpus supports), training `anuvad train` on
# data/train.tsv with the same global batch (--batch-tokens) and steps. Reports per run the
# target tokens/s of the run's own summary and, with 2 ranks, the time per update spent in the
# gradient allreduce and, before it, waiting for the slower rank; then medians. Not a test: the
# figures depend on the machine and on its load (recorded in OUT/loadavg.tsv).
# Usage: tests/bench/mpi_scaling.sh [--configs tiny,small] [--steps N] [--repeats R] [--out DIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
configs=tiny,small steps=150 repeats=3 OUT=""
while [ $# -gt 0 ]; do
  case $1 in
    --configs) configs=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
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
launch=(mpirun --oversubscribe -np 2)
[ "$(id -u)" -eq 0 ] && launch+=(--allow-run-as-root)

config_json() {  # name → the architecture of tests/bench (vocabulary sizes set by flags)
  case $1 in
    tiny) echo '{"d_model": 64, "n_heads": 4, "d_ff": 256, "encoder_layers": 2, "decoder_layers": 2, "dropout": 0.1}' ;;
    small) echo '{"d_model": 256, "n_heads": 4, "d_ff": 1024, "encoder_layers": 3, "decoder_layers": 3, "dropout": 0.1}' ;;
    *) echo "unknown config $1" >&2; exit 1 ;;
  esac
}

results="$OUT/runs.tsv"
printf 'config\tlayout\trepeat\ttgt_tok_per_s\tallreduce_ms_per_update\twait_ms_per_update\tseconds\tparameters\n' > "$results"
for cfg in ${configs//,/ }; do
  config_json "$cfg" > "$OUT/$cfg.json"
  for r in $(seq 1 "$repeats"); do
    for layout in 1x2 2x1; do
      args=(train --train-sets "$repo/data/train.tsv" --no-valid -c "$OUT/$cfg.json" --src-vocab-size 1000
            --tgt-vocab-size 1000 --batch-tokens 2000 --after-steps "$steps" --after-epochs 0 --save-freq 0
            --no-resume -q --disp-freq 0 -m "$OUT/$cfg-$layout.safetensors")
      log="$OUT/$cfg-$layout-$r.log"
      printf '%s\t%s-%s-%s\t%s\n' "$(date +%H:%M:%S)" "$cfg" "$layout" "$r" "$(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/loadavg.tsv"
      if [ $layout = 1x2 ]; then
        "$ANUVAD" "${args[@]}" --cpu-threads 2 > "$log" 2>&1
      else
        "${launch[@]}" "$ANUVAD" "${args[@]}" --cpu-threads 1 > "$log" 2>&1
      fi
      python3 - "$log" "$cfg" "$layout" "$r" >> "$results" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
done = re.search(r"done: .* in ([0-9.]+) s, ([0-9]+) target tokens/s", text)
ar = re.search(r"per update ([0-9.]+) ms waiting for the slowest rank, ([0-9.]+) ms in the allreduce", text)
params = re.search(r"\| ([0-9]+) parameters \|", text)
if not done or not params:
    sys.exit(f"{sys.argv[1]}: no summary line")
print("\t".join([sys.argv[2], sys.argv[3], sys.argv[4], done.group(2), ar.group(2) if ar else "",
                 ar.group(1) if ar else "",
                 done.group(1), params.group(1)]))
PY
    done
  done
done
python3 - "$results" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
print("median over repeats (the machine is shared: see loadavg.tsv)")
print("config  layout  params    tgt tok/s  allreduce ms/update  wait ms/update  s/run")
for cfg in dict.fromkeys(r["config"] for r in rows):
    for layout in ("1x2", "2x1"):
        rs = [r for r in rows if r["config"] == cfg and r["layout"] == layout]
        if not rs:
            continue
        tps = statistics.median(float(r["tgt_tok_per_s"]) for r in rs)
        ar = [float(r["allreduce_ms_per_update"]) for r in rs if r["allreduce_ms_per_update"]]
        wait = [float(r["wait_ms_per_update"]) for r in rs if r["wait_ms_per_update"]]
        sec = statistics.median(float(r["seconds"]) for r in rs)
        print(f"{cfg:7} {layout:7} {rs[0]['parameters']:>8}  {tps:9.0f}  {statistics.median(ar) if ar else float('nan'):19.2f}  {statistics.median(wait) if wait else float('nan'):14.2f}  {sec:5.1f}")
PY
echo "runs: $results"
