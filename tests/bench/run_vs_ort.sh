#!/usr/bin/env bash
# anuvad vs ONNX Runtime (npm's onnxruntime-node, MLAS kernels) on cached greedy decoding: the
# reference model of ../shared/bench/torch_ref.py exported to ONNX by ../shared/bench/ort/ (its
# README), run by its bench.js, alternated with anuvad_bench's decode_cached_b1 / _b64 round by
# round (ORT b1 per graph, ours b1, ORT b64 per graph, ours b64), each in its own process. Writes
# ort/ort.jsonl and anuvad/vs_ort.jsonl to the results folder and prints the tables with the ratios
# ours / ORT (summarize.py). run_vs_torch.sh --ort runs this after the PyTorch comparison, on the
# same folder, so that one command gives both. See tests/bench/README.md.
#
#   tests/bench/run_vs_ort.sh                          # tiny, small, base; 3 rounds
#   tests/bench/run_vs_ort.sh --configs small,base --rounds 5
#   tests/bench/run_vs_ort.sh --configs tiny --quick   # smoke test
#   tests/bench/run_vs_ort.sh --configs small,base --compute-types float32,bfloat16
#
# Options:
#   --out DIR        results folder (default $TMPDIR/anuvad-ort-<date>, or /tmp/...)
#   --configs LIST   comma-separated subset of tiny,small,base (default all three)
#   --rounds N       alternated rounds per config (default 3; 1 with --quick)
#   --quick          one repeat per process, one round: a smoke test, not a measurement
#   --compute-types LIST  anuvad's side once per compute type in each round (anuvad_bench
#                    --compute-type; default float32; float32,bfloat16 adds a bfloat16 row, the
#                    decoder weights rounded to bfloat16 as `anuvad translate --compute-type`)
#   --install        apt-get install what is missing (python3-torch python3-numpy python3-onnx,
#                    nodejs npm when there is no node / npm); otherwise the comparison is skipped
#                    with a message (exit 0), as it is when ../shared/bench/ort is absent
#   --no-summary     do not print the tables (run_vs_torch.sh prints them once for both)
# Environment:
#   BENCH            anuvad_bench binary (default: build/tests/anuvad_bench, (re)built first)
#   THREADS          threads on both sides (default 2; ORT: intra-op threads, no spinning)
#   ORT_DIR          scratch folder for the graphs and node_modules, kept between runs (default
#                    $TMPDIR/anuvad-ort or /tmp/anuvad-ort); ../shared/bench/ort is copied there
#   ORT_SRC          default ../shared/bench/ort; TORCH_BENCH_DIR default ../shared/bench
#   ORT_VERSION      onnxruntime-node version (default 1.30.0)
#   ORT_GRAPHS       graph variants, "fused std" (default; fused needs python3-onnx)
#   PY               Python with torch for the export (default /usr/bin/python3)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$here/common.sh"
command_line="$0 $*"
configs="tiny,small,base"
quick=0 install=0 summary=1 rounds="" compute_types=float32
OUT="${OUT:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    --configs) configs="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --compute-types) compute_types="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --install) install=1; shift ;;
    --no-summary) summary=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_vs_ort.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
THREADS="${THREADS:-2}"
OUT="${OUT:-${TMPDIR:-/tmp}/anuvad-ort-$(date +%Y%m%d-%H%M%S)}"
ORT_DIR="${ORT_DIR:-${TMPDIR:-/tmp}/anuvad-ort}"
ORT_SRC="${ORT_SRC:-$(bench_shared_dir)/bench/ort}"
TORCH_BENCH_DIR="${TORCH_BENCH_DIR:-$(bench_shared_dir)/bench}"
ORT_VERSION="${ORT_VERSION:-1.30.0}"
ORT_GRAPHS="${ORT_GRAPHS:-fused std}"
PY="${PY:-/usr/bin/python3}"
[ -n "$rounds" ] || rounds=$([ "$quick" = 1 ] && echo 1 || echo 3)
common_args=(--threads "$THREADS")
ort_args=(--threads "$THREADS" --no-spin)
if [ "$quick" = 1 ]; then
  common_args+=(--repeats 1)
  ort_args+=(--repeats 1 --warmup 1)
fi
skip() { echo "run_vs_ort.sh: $1; skipping the ONNX Runtime comparison" >&2; exit 0; }

bench_clean_blas_env

# ---- prerequisites (../shared/bench/ort/README.md)
[ -f "$ORT_SRC/bench.js" ] || skip "no $ORT_SRC/bench.js (../shared/bench/ort)"
[ -f "$TORCH_BENCH_DIR/torch_ref.py" ] || skip "no $TORCH_BENCH_DIR/torch_ref.py"
missing_pkgs() {
  local p=""
  "$PY" -c 'import torch, numpy' 2>/dev/null || p="$p python3-torch python3-numpy"
  case " $ORT_GRAPHS " in *" fused "*) "$PY" -c 'import onnx' 2>/dev/null || p="$p python3-onnx" ;; esac
  command -v node >/dev/null || p="$p nodejs"
  command -v npm >/dev/null || p="$p npm"
  echo "$p"
}
pkgs="$(missing_pkgs)"
if [ -n "$pkgs" ] && [ "$install" = 1 ]; then
  apt-get install -y $pkgs >&2 || { apt-get update >&2 && apt-get install -y $pkgs >&2; } || true
  pkgs="$(missing_pkgs)"
fi
if [ "$pkgs" = " python3-onnx" ]; then  # the std graphs need only torch
  echo "run_vs_ort.sh: no python3-onnx (apt-get install -y python3-onnx, or --install): std graphs only" >&2
  ORT_GRAPHS=std
elif [ -n "$pkgs" ]; then
  skip "needs apt-get install -y$pkgs (or pass --install)"
fi

# ---- scratch folder: the ort scripts, onnxruntime-node, and the exported graphs per config
mkdir -p "$ORT_DIR"
stamp="$(cat "$ORT_SRC"/*.py "$ORT_SRC"/*.js "$TORCH_BENCH_DIR/torch_ref.py" | sha256sum | cut -c1-16)"
if [ "$(cat "$ORT_DIR/.source-stamp" 2>/dev/null)" != "$stamp" ]; then  # new scripts: new graphs
  rm -f "$ORT_DIR"/*.onnx "$ORT_DIR"/data_*.json
  cp -r --no-preserve=mode "$ORT_SRC"/. "$ORT_DIR"/
  echo "$stamp" > "$ORT_DIR/.source-stamp"
fi
ort_installed() { (cd "$ORT_DIR" && node -p "require('onnxruntime-node/package.json').version" 2>/dev/null); }
if [ "$(ort_installed)" != "$ORT_VERSION" ]; then
  echo "npm install --ignore-scripts onnxruntime-node@$ORT_VERSION in $ORT_DIR..." >&2
  # --ignore-scripts: the install script only fetches GPU files; the CPU library is in the package
  (cd "$ORT_DIR" && npm install --ignore-scripts --no-audit --no-fund "onnxruntime-node@$ORT_VERSION" >&2) ||
    skip "npm install onnxruntime-node@$ORT_VERSION failed (no network?)"
fi
IFS=',' read -r -a config_list <<< "$configs"
for c in "${config_list[@]}"; do
  if [ ! -f "$ORT_DIR/enc_$c.onnx" ] || [ ! -f "$ORT_DIR/data_$c.json" ]; then
    echo "exporting $c to ONNX (torch_ref's model and sources, once per ORT_DIR)..." >&2
    (cd "$ORT_DIR" && TORCH_REF_DIR="$TORCH_BENCH_DIR" "$PY" export.py --config "$c" >&2) ||
      skip "export.py --config $c failed"
  fi
  case " $ORT_GRAPHS " in *" fused "*)
    if [ ! -f "$ORT_DIR/fused_enc_$c.onnx" ]; then
      (cd "$ORT_DIR" && TORCH_REF_DIR="$TORCH_BENCH_DIR" "$PY" build_fused.py --config "$c" >&2) ||
        skip "build_fused.py --config $c failed"
    fi ;;
  esac
done

bench_build
mkdir -p "$OUT/anuvad" "$OUT/ort"
echo "results -> $OUT" >&2
[ -f "$OUT/loadavg.tsv" ] || printf 'time\twhat\tload1\tload5\tload15\n' > "$OUT/loadavg.tsv"
{
  echo "command: $command_line"
  bench_machine_info
  echo "onnxruntime-node: $(ort_installed) (node $(node --version)), graphs: $ORT_GRAPHS, $ORT_DIR"
  echo "load at start: $(cat /proc/loadavg)"
} >> "$OUT/machine.txt"
[ -s "$OUT/kernels.jsonl" ] || bench_record_kernels

failed=0
theirs() {  # theirs CONFIG b1|b64 GRAPH -> one bench.js process, JSON appended to ort/ort.jsonl
  local c="$1" m="$2" g="$3" t0=$SECONDS prefix=()
  [ "$g" = fused ] && prefix=(--prefix fused_)
  bench_note_load "ort $c $m $g"
  if ! (cd "$ORT_DIR" && peer node bench.js --config "$c" --mode "$m" "${ort_args[@]}" "${prefix[@]}") \
      >> "$OUT/ort/ort.jsonl" 2>> "$OUT/ort/ort.log"; then
    echo "  ORT $c $m $g FAILED (see $OUT/ort/ort.log)" >&2; failed=$((failed + 1))
  fi
  echo "  ORT $c $m $g: $((SECONDS - t0)) s" >&2
}

for c in "${config_list[@]}"; do
  echo "== $c vs ONNX Runtime" >&2
  bench_ceiling "$c"
  for r in $(seq "$rounds"); do
    for m in b1 b64; do
      for g in $ORT_GRAPHS; do theirs "$c" "$m" "$g"; done
      for ct in ${compute_types//,/ }; do
        file=vs_ort ours "$c" "decode_cached_$m" --check 0 --compute-type "$ct"
      done
    done
  done
done
bench_note_load end
echo "load at end: $(cat /proc/loadavg)" >> "$OUT/machine.txt"

if [ "$summary" = 1 ]; then
  python3 "$here/summarize.py" "$OUT" | tee "$OUT/summary.md"
  echo >&2
  echo "results in $OUT (summary.md, machine.txt, loadavg.tsv)" >&2
fi
[ "$failed" = 0 ]
