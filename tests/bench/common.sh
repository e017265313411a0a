# Shell functions shared by run_vs_torch.sh and run_vs_ort.sh (sourced, not run). They expect
# `here` (this folder), `repo`, `OUT`, `THREADS` and `common_args` (arguments for every
# anuvad_bench run) to be set, and count failures in `failed`.

# ../shared (the PyTorch and ONNX Runtime references, outside the repository) next to the
# repository, or next to the main checkout when this is a git worktree.
bench_shared_dir() {
  local common
  common="$(git -C "$repo" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)"
  if [ ! -d "$repo/../shared" ] && [ -n "$common" ] && [ -d "$(dirname "$common")/../shared" ]; then
    echo "$(cd "$(dirname "$common")/../shared" && pwd)"
  else
    echo "$repo/../shared"
  fi
}

# OpenBLAS picks its kernel ("core") by CPUID at start-up unless OPENBLAS_CORETYPE forces one;
# a forced older kernel handicaps whichever side gets it (e.g. Haswell's AVX2 kernels on an
# AVX-512 BF16 CPU). Every benchmark process here runs without the OPENBLAS_* / GOTO_* variables;
# the caller's values are kept in `caller_blas_env` (JSON) for kernels.jsonl and the summary.
bench_clean_blas_env() {
  caller_blas_env="$({ env | grep -E '^(OPENBLAS|GOTO)_[A-Z0-9_]*=' || true; } | python3 -c '
import json, sys
print(json.dumps({"side": "caller_env", "vars": dict(l.rstrip("\n").split("=", 1) for l in sys.stdin)}))')"
  local v
  for v in $(compgen -e | grep -E '^(OPENBLAS|GOTO)_' || true); do
    echo "note: $v=${!v} is set in your environment; unsetting it for every benchmark process" >&2
    unset "$v"
  done
}

# The peers (PyTorch, ONNX Runtime) run with glibc's malloc on transparent huge pages, the
# setting anuvad's training uses (core/runtime.h back_heap_with_huge_pages): on the Zen 5 test
# host (kernel THP in `madvise` mode) it made torch_ref's training 12-13 % faster (2026-12-06,
# 3 alternated rounds: small 223 -> 197, base 1,159 -> 1,008 ms per step); without it the
# PyTorch side would run handicapped. PyTorch's decoding runs both ways and the summary keeps
# the faster per mode (alternated, 2026-12-06: faster with it at batch 64, e.g. base cached
# 1,059 -> 1,446 tok/s; mixed at batch 1; see tests/bench/README.md). `peer` CMD... runs CMD with it.
PEER_GLIBC_TUNABLES="glibc.malloc.hugetlb=1"
peer() { GLIBC_TUNABLES="$PEER_GLIBC_TUNABLES${GLIBC_TUNABLES:+:$GLIBC_TUNABLES}" "$@"; }

# BENCH: the anuvad_bench binary, (re)built from the current sources unless given.
bench_build() {
  BENCH="${BENCH:-}"
  if [ -z "$BENCH" ]; then  # a no-op when up to date
    BENCH="$repo/build/tests/anuvad_bench"
    echo "building anuvad_bench..." >&2
    cmake -S "$repo" -B "$repo/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
    make -C "$repo/build" -j2 anuvad_bench >/dev/null
  fi
  [ -x "$BENCH" ] || { echo "no anuvad_bench at $BENCH" >&2; exit 1; }
}

# kernels.jsonl: the caller's OPENBLAS_* variables and the OpenBLAS core anuvad_bench's library
# picks here (without them: OpenBLAS's best for this CPU). Once per results folder.
bench_record_kernels() {
  local k="$OUT/kernels.jsonl"
  echo "$caller_blas_env" >> "$k"
  { python3 "$here/blas_kernels.py" binary "$BENCH" || echo '{"error": "probe failed"}'; } |
    python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); d["side"]="anuvad_lib"; print(json.dumps(d))' >> "$k"
}

bench_note_load() {
  printf '%s\t%s\t%s\n' "$(date +%H:%M:%S)" "$1" "$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' '\t')" >> "$OUT/loadavg.tsv"
}

bench_machine_info() {  # the lines of machine.txt common to both comparisons
  echo "date: $(date -Is)"
  echo "anuvad_bench: $BENCH, built $(date -r "$BENCH" -Is)"
  echo "repo: $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?') $(git -C "$repo" status --porcelain 2>/dev/null | grep -q . && echo '(uncommitted changes present)')"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) x $(nproc); family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') model $(grep -m1 '^model' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')"
  echo "avx512f: $(grep -qw avx512f /proc/cpuinfo && echo yes || echo no); avx512_bf16: $(grep -qw avx512_bf16 /proc/cpuinfo && echo yes || echo no)"
  echo "kernel: $(uname -r)"
  echo "g++: $(g++ --version | head -1)"
  echo "eigen: $(dpkg-query -W -f='${Version}' libeigen3-dev 2>/dev/null || echo '?')"
  echo "caller's OpenBLAS variables (unset for the run): $caller_blas_env"
  echo "threads: $THREADS"
}

# ours CONFIG MODE [extra args]: one anuvad_bench process, JSON appended to anuvad/${file}.jsonl
# (file: anuvad by default); the train and greedy modes get the config's ceiling run, if any.
ours() {
  local c="$1" m="$2"; shift 2
  local t0=$SECONDS ceil=()
  [ -s "$OUT/anuvad/ceiling.jsonl" ] && [ "$m" != ceiling ] && ceil=(--ceiling "$OUT/anuvad/ceiling.jsonl")
  bench_note_load "anuvad $c $m $*"
  if ! "$BENCH" --config "$c" --mode "$m" "${common_args[@]}" "${ceil[@]}" "$@" \
      >> "$OUT/anuvad/${file:-anuvad}.jsonl" 2>> "$OUT/anuvad/anuvad.log"; then
    echo "  anuvad $c $m FAILED (see $OUT/anuvad/anuvad.log)" >&2; failed=$((failed + 1))
  fi
  echo "  anuvad $c $m $*: $((SECONDS - t0)) s" >&2
}

# The FMA peak and the best GEMM rates of CONFIG's workloads (anuvad_bench --mode ceiling),
# once per config and results folder; a quick run times each product for less.
declare -A bench_ceiling_done=()
bench_ceiling() {
  local c="$1"
  [ -n "${bench_ceiling_done[$c]:-}" ] && return 0
  bench_ceiling_done[$c]=1
  if [ -s "$OUT/anuvad/ceiling.jsonl" ] && grep -q "\"config\":\"$c\".*\"mode\":\"ceiling\"" "$OUT/anuvad/ceiling.jsonl"; then
    return 0  # measured by an earlier script on this folder (run_vs_torch.sh --ort)
  fi
  if [ "${quick:-0}" = 1 ]; then
    file=ceiling ours "$c" ceiling --min-time 0.005
  else
    file=ceiling ours "$c" ceiling
  fi
}
