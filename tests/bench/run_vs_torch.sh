#!/usr/bin/env bash
# anuvad vs the PyTorch reference (../shared/bench/torch_ref.py) on this machine: runs both
# benchmarks alternately, config by config and mode by mode, each config x mode in its own
# process, writes the JSON lines to a results folder and prints markdown tables with the ratios
# ours / torch (tests/bench/summarize.py). Before each config's modes, `anuvad_bench --mode
# ceiling` measures the FMA peak and the best GEMM rate on that config's products, and every
# train / greedy row reports its useful GFLOP/s against both. Both sides run without
# OPENBLAS_CORETYPE and the other OPENBLAS_* variables; kernels.jsonl records the OpenBLAS kernel
# each side's library picks, and the summary warns when a side ran a lesser one than the CPU
# supports. See tests/bench/README.md.
#
#   tests/bench/run_vs_torch.sh                    # tiny, small, base: train + greedy decode (~8-10 min)
#   tests/bench/run_vs_torch.sh --extras           # + anuvad-only beam 4, greedy API, length scaling
#   tests/bench/run_vs_torch.sh --only-extras      # just the anuvad-only modes (~3 min)
#   tests/bench/run_vs_torch.sh --configs tiny,small --quick
#   tests/bench/run_vs_torch.sh --ort              # + ONNX Runtime (run_vs_ort.sh) in the same folder
#   tests/bench/run_vs_torch.sh --ort --compute-types float32,bfloat16   # + anuvad's bfloat16 row vs ORT
#
# Options:
#   --out DIR          results folder (default $TMPDIR/anuvad-bench-<date>, or /tmp/...)
#   --configs LIST     comma-separated subset of tiny,small,base (default all three)
#   --quick            fewer steps/repeats on both sides (--steps 3 --warmup 1 --repeats 1
#                      --bs1-sentences 8): a smoke test, not a measurement
#   --extras           also the anuvad-only modes (greedy_api_b*, beam4_cached_b* next to a
#                      decode_cached_b* rerun, decode_length, scale_train / scale_decode at
#                      L = 16, 64, 256, 1024)
#   --only-extras      only those
#   --no-torch         anuvad side only
#   --ort              then run_vs_ort.sh on the same folder and configs: cached greedy decoding
#                      against ONNX Runtime, alternated; one summary for both comparisons
#   --compute-types L  anuvad's cached greedy modes once per compute type beside PyTorch, and
#                      with --ort the same list for run_vs_ort.sh (default float32,bfloat16,int8:
#                      `anuvad translate`'s default, auto, is bfloat16 in a native build on an
#                      AVX2 / AVX-512 CPU; int8 is `--compute-type int8`; the naive modes and
#                      training are float32 only). bfloat16 and int8 in the list also run
#                      PyTorch's own bfloat16 and int8 decoding (torch_bf16_decode.py --dtype)
#   --rounds N         decoding against PyTorch N times per config, alternated (PyTorch's
#                      decoding in float32 and in the --compute-types' bfloat16 and int8, then
#                      ours, cached, in every compute type; round 1 is the main pass, which also
#                      runs our naive modes; torch_ref.py's decoding process times its naive modes
#                      too, so those PyTorch rows have N rounds, ours one): the summary shows each
#                      side's median over the rounds of a process's median, so that a minute of a
#                      slow host moves one round, not the ratio (default 1; an extra round of
#                      tiny,small,base took 18-19 minutes on an AVX2-only Zen 3, 9 of them
#                      PyTorch's bfloat16 decoding of base). Not for --only-extras; with --ort,
#                      run_vs_ort.sh keeps its own rounds (3)
#   --install          apt-get install the torch (and with --ort the ONNX Runtime) side's
#                      packages when missing (needs root)
# Environment:
#   BENCH              anuvad_bench binary to use as is (default: build/tests/anuvad_bench, which
#                      is (re)built here with cmake + make anuvad_bench first)
#   TORCH_BENCH_DIR    folder of torch_ref.py (default: ../shared/bench relative to the repo root,
#                      or to the main checkout of a git worktree); when absent the torch side is
#                      skipped
#   PY                 Python for torch_ref.py (default /usr/bin/python3, Debian's, with python3-torch)
#   BLAS               openblas-openmp (default) | openblas-pthread | reference | system: torch's BLAS
#                      via LD_LIBRARY_PATH, exactly as ../shared/bench/run_all.sh picks it
#   THREADS            threads on both sides (default 2)
#   SCALE_CONFIG       config of the sentence-length scaling (default small)
#   SCALE_LENGTHS      (default "16 64 256 1024")
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$here/common.sh"
command_line="$0 $*"
configs="tiny,small,base"
quick=0 main=1 extras=0 torch_side=1 install=0 ort=0 compute_types=float32,bfloat16,int8 rounds=1
OUT="${OUT:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    --configs) configs="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --extras) extras=1; shift ;;
    --only-extras) extras=1; main=0; shift ;;
    --no-torch) torch_side=0; shift ;;
    --ort) ort=1; shift ;;
    --compute-types) compute_types="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --install) install=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_vs_torch.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "run_vs_torch.sh: --rounds needs a whole number >= 1, not '$rounds'" >&2; exit 2; }
THREADS="${THREADS:-2}"
OUT="${OUT:-${TMPDIR:-/tmp}/anuvad-bench-$(date +%Y%m%d-%H%M%S)}"
TORCH_BENCH_DIR="${TORCH_BENCH_DIR:-$(bench_shared_dir)/bench}"
PY="${PY:-/usr/bin/python3}"
BLAS="${BLAS:-openblas-openmp}"
SCALE_CONFIG="${SCALE_CONFIG:-small}"
SCALE_LENGTHS="${SCALE_LENGTHS:-16 64 256 1024}"
common_args=(--threads "$THREADS")
[ "$quick" = 1 ] && common_args+=(--steps 3 --warmup 1 --repeats 1 --bs1-sentences 8)

# ---- anuvad_bench, without the caller's OPENBLAS_* variables (common.sh)
bench_clean_blas_env
bench_build

# ---- torch side: Debian's python3-torch with OpenBLAS (as ../shared/bench/run_all.sh)
lib_path=""
if [ "$torch_side" = 1 ] && [ "$main" = 1 ]; then
  if [ ! -f "$TORCH_BENCH_DIR/torch_ref.py" ]; then
    echo "no $TORCH_BENCH_DIR/torch_ref.py: skipping the PyTorch side" >&2
    torch_side=0
  fi
fi
if [ "$torch_side" = 1 ] && [ "$main" = 1 ]; then
  pkgs="python3-torch python3-numpy"
  case "$BLAS" in openblas-openmp) pkgs="$pkgs libopenblas0-openmp" ;; openblas-pthread) pkgs="$pkgs libopenblas0-pthread" ;; esac
  multiarch="$(gcc -print-multiarch 2>/dev/null || dpkg-architecture -qDEB_HOST_MULTIARCH)"
  alt_dir() {
    update-alternatives --list "$1-$multiarch" 2>/dev/null | grep "/$2/$1\$" | head -1 | xargs -r dirname
  }
  missing=0
  "$PY" -c 'import torch, numpy' 2>/dev/null || missing=1
  case "$BLAS" in openblas-*) [ -n "$(alt_dir libblas.so.3 "$BLAS")" ] || missing=1 ;; esac
  if [ "$missing" = 1 ]; then
    if [ "$install" = 1 ]; then
      apt-get install -y $pkgs >&2 || { apt-get update >&2 && apt-get install -y $pkgs >&2; }
    else
      echo "the PyTorch side needs: apt-get install -y $pkgs (or pass --install); skipping it" >&2
      torch_side=0
    fi
  fi
fi
if [ "$torch_side" = 1 ] && [ "$main" = 1 ]; then
  case "$BLAS" in
    openblas-openmp)  lib_path="$(alt_dir libblas.so.3 openblas-openmp)" ;;
    openblas-pthread) lib_path="$(alt_dir libblas.so.3 openblas-pthread)" ;;
    reference)
      b="$(alt_dir libblas.so.3 blas)"; l="$(alt_dir liblapack.so.3 lapack)"
      lib_path="$b${l:+:$l}" ;;
    system) lib_path="" ;;
    *) echo "BLAS must be openblas-openmp, openblas-pthread, reference or system" >&2; exit 2 ;;
  esac
fi
with_blas() { if [ -n "$lib_path" ]; then LD_LIBRARY_PATH="$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; else "$@"; fi; }

mkdir -p "$OUT/anuvad" "$OUT/torch"
echo "results -> $OUT" >&2
[ -f "$OUT/loadavg.tsv" ] || printf 'time\twhat\tload1\tload5\tload15\n' > "$OUT/loadavg.tsv"
{
  echo "command: $command_line"
  bench_machine_info
  if [ "$torch_side" = 1 ] && [ "$main" = 1 ]; then
    echo "python: $("$PY" --version 2>&1)"
    echo "torch: $("$PY" -c 'import torch; print(torch.__version__)')"
    echo "BLAS mode: $BLAS (LD_LIBRARY_PATH prefix: ${lib_path:-none})"
    echo "torch's training and ONNX Runtime run with GLIBC_TUNABLES=$PEER_GLIBC_TUNABLES (malloc on transparent huge pages, as anuvad train); torch's decoding once without and once with it, the faster kept per mode (torch/*_hugepages.jsonl)"
  fi
  echo "load at start: $(cat /proc/loadavg)"
} >> "$OUT/machine.txt"
# the OpenBLAS kernel each side's library picks on this CPU (no OPENBLAS_* variables: its best)
bench_record_kernels
if [ "$torch_side" = 1 ] && [ "$main" = 1 ]; then
  { with_blas "$PY" "$here/blas_kernels.py" torch || echo '{"error": "probe failed"}'; } |
    python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); d["side"]="torch_lib"; print(json.dumps(d))' >> "$OUT/kernels.jsonl"
fi

failed=0
theirs() {  # theirs CONFIG MODE
  local c="$1" m="$2"
  local t0=$SECONDS
  bench_note_load "torch $c $m"
  # training on huge pages (measured faster); decoding once each way, the summary keeps the faster
  local runs=("peer with_blas:torch_ref") hp
  [ "$m" = train ] || runs=("with_blas:torch_ref" "peer with_blas:torch_ref_hugepages")
  for hp in "${runs[@]}"; do
    if ! ${hp%%:*} "$PY" "$TORCH_BENCH_DIR/torch_ref.py" --config "$c" --mode "$m" "${common_args[@]}" \
        >> "$OUT/torch/${hp#*:}.jsonl" 2>> "$OUT/torch/torch_ref.log"; then
      echo "  torch $c $m FAILED (see $OUT/torch/torch_ref.log)" >&2; failed=$((failed + 1))
    fi
  done
  echo "  torch $c $m: $((SECONDS - t0)) s" >&2
}

theirs_decode() {  # theirs_decode CONFIG: PyTorch's float32 decoding, then its bfloat16 and int8
  local c="$1" dt hp
  theirs "$c" decode
  for dt in bfloat16 int8; do  # PyTorch's own lower-precision decoding beside ours
    if [[ ",$compute_types," == *,$dt,* ]]; then
      bench_note_load "torch $dt $c decode"
      for hp in "with_blas:torch_$dt" "peer with_blas:torch_${dt}_hugepages"; do  # as theirs()
        PYTHONPATH="$TORCH_BENCH_DIR" ${hp%%:*} "$PY" "$here/torch_bf16_decode.py" --config "$c" --threads "$THREADS" \
          --dtype "$dt" >> "$OUT/torch/${hp#*:}.jsonl" 2>> "$OUT/torch/torch_ref.log" ||
          { echo "  torch $dt $c decode FAILED (see $OUT/torch/torch_ref.log)" >&2; failed=$((failed + 1)); }
      done
    fi
  done
}

IFS=',' read -r -a config_list <<< "$configs"
if [ "$main" = 1 ]; then
  for c in "${config_list[@]}"; do
    echo "== $c" >&2
    bench_ceiling "$c"
    [ "$torch_side" = 1 ] && theirs "$c" train
    file=anuvad ours "$c" train
    [ "$torch_side" = 1 ] && theirs_decode "$c"
    for m in decode_naive_b1 decode_cached_b1 decode_naive_b64 decode_cached_b64; do
      if [[ "$m" == decode_cached_* ]]; then
        for ct in ${compute_types//,/ }; do file=anuvad ours "$c" "$m" --compute-type "$ct"; done
      else
        file=anuvad ours "$c" "$m"
      fi
    done
    for ((round = 2; round <= rounds; round++)); do  # --rounds: alternated again
      echo "== $c, cached greedy decoding, round $round of $rounds" >&2
      [ "$torch_side" = 1 ] && theirs_decode "$c"
      for m in decode_cached_b1 decode_cached_b64; do
        for ct in ${compute_types//,/ }; do file=anuvad ours "$c" "$m" --compute-type "$ct"; done
      done
    done
  done
fi
if [ "$extras" = 1 ]; then
  echo "== anuvad-only modes" >&2
  for c in "${config_list[@]}"; do
    bench_ceiling "$c"
    # decode_cached again right before the beam_search modes, so that their ratio to it is
    # measured under the same machine load
    for m in decode_cached_b1 greedy_api_b1 beam4_cached_b1 decode_cached_b64 greedy_api_b64 beam4_cached_b64; do
      file=extras ours "$c" "$m"
    done
  done
  file=extras ours small decode_length --lengths 20,40,80,100
  for L in $SCALE_LENGTHS; do
    file=extras ours "$SCALE_CONFIG" scale_train --length "$L"
    file=extras ours "$SCALE_CONFIG" scale_decode --length "$L"
  done
fi
bench_note_load end
echo "load at end: $(cat /proc/loadavg)" >> "$OUT/machine.txt"
if [ "$ort" = 1 ]; then
  ort_args=(--out "$OUT" --configs "$configs" --no-summary --compute-types "$compute_types")
  [ "$quick" = 1 ] && ort_args+=(--quick)
  [ "$install" = 1 ] && ort_args+=(--install)
  BENCH="$BENCH" THREADS="$THREADS" "$here/run_vs_ort.sh" "${ort_args[@]}" || failed=$((failed + 1))
fi

python3 "$here/summarize.py" "$OUT" | tee "$OUT/summary.md"
echo >&2
echo "results in $OUT (summary.md, machine.txt, loadavg.tsv)" >&2
[ "$failed" = 0 ]
