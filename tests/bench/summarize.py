#!/usr/bin/env python3
"""Markdown tables of a benchmark folder written by run_vs_torch.sh / run_vs_ort.sh.

    python3 tests/bench/summarize.py RESULTS_DIR [RESULTS_DIR ...]

Reads every *.jsonl under each RESULTS_DIR (recursively; several folders are merged, e.g. a main
run and an --only-extras run). A line with "impl": "anuvad" comes from anuvad_bench (its modes
"ceiling" / "ceiling_fma" are the machine's ceiling), one with an "engine" from ONNX Runtime's
bench.js, one with a "side" from blas_kernels.py (kernels.jsonl), any other line with a "mode"
from ../shared/bench/torch_ref.py. Prints: the BLAS kernel of each side with warnings when a side
ran a lesser kernel than the CPU supports or the caller's environment forced one, the FMA peak
and the best GEMM rate per workload, training (target tokens/s), greedy decoding (tokens/s),
useful GFLOP/s against the ceiling, peak RSS per mode, each with the ratio ours / torch, cached
greedy decoding against ONNX Runtime, then the anuvad-only tables (greedy through beam_search,
beam 4, output-length scaling, sentence-length scaling) when those modes were run. Every figure
is the median (min–max) over the repeats inside one process, or, for a mode measured in several
alternated rounds (run_vs_torch.sh --rounds), the median (min–max) over the rounds of each
process's median; of several torch rows for one config, mode and type (its decoding runs with
and without huge pages) the fastest is shown.
RESULTS_DIR/loadavg.tsv gives the load average seen before each process started.
"""
import argparse
import json
import os
import sys

from blas_kernels import ISA_NAMES, isa_level

DECODE_MODES = ["decode_naive_b1", "decode_cached_b1", "decode_naive_b64", "decode_cached_b64"]
CONFIG_ORDER = {"tiny": 0, "small": 1, "base": 2}


def load_dir(d):
    rows = []
    for root, _, files in os.walk(d):
        for f in sorted(files):
            if not f.endswith(".jsonl"):
                continue
            with open(os.path.join(root, f)) as fh:
                for line in fh:
                    line = line.strip()
                    if line.startswith("{"):
                        try:
                            r = json.loads(line)
                        except json.JSONDecodeError:
                            continue
                        r["_file"] = f
                        r["_dir"] = d
                        rows.append(r)
    return rows


def fmt(x, digits=None):
    if x is None:
        return "-"
    if digits is None:
        digits = 0 if abs(x) >= 100 else (1 if abs(x) >= 10 else 2)
    return f"{x:,.{digits}f}"


def stat(s, digits=None):
    if not s:
        return "-"
    rounds = f"; {s['rounds']} rounds" if s.get("rounds", 1) > 1 else ""
    return f"{fmt(s['median'], digits)} ({fmt(s['min'], digits)}–{fmt(s['max'], digits)}{rounds})"


def med(s):
    return s["median"] if s else None


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.2f}x"


def rss_of(r):
    if r is None:
        return None
    return r.get("peak_rss_mib", r.get("peak_rss_mib_so_far"))


def pct(x):
    if x is None:
        return "-"
    return f"{100 * x:.1f} %" if x < 0.1 else f"{100 * x:.0f} %"


def frac(a, b):
    return None if a is None or not b else a / b


def last(rows, **match):
    """The last row whose fields equal `match` (None when there is none)."""
    found = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    return found[-1] if found else None


def core_of(rows):
    """The OpenBLAS core(s) that the env of these rows reports, e.g. "Cooperlake"."""
    cores = sorted({r["env"].get("blas_core") or "?" for r in rows if r.get("env")})
    return ", ".join(cores) if cores else None


def kernel_warnings(kernels, ours, torch):
    """Lines that must not be missed: a forced OpenBLAS kernel, or a side below the CPU's best."""
    warn = []
    caller = last(kernels, side="caller_env")
    forced = {k: v for k, v in (caller or {}).get("vars", {}).items() if k.startswith("OPENBLAS_CORETYPE")}
    if forced:
        warn.append(f"the caller's environment sets {', '.join(f'{k}={v}' for k, v in forced.items())}: "
                    f"the scripts unset it for every benchmark process, but any run of your own with it set "
                    f"forces that kernel")
    for r in ours + torch:
        env = r.get("env") or {}
        if env.get("openblas_coretype_env"):
            warn.append(f"{r.get('impl', 'torch')} {r['config']} {r['mode']} ran with OPENBLAS_CORETYPE="
                        f"{env['openblas_coretype_env']}")
            break
    for side, rows, lib in (("anuvad", ours, last(kernels, side="anuvad_lib")),
                            ("PyTorch", torch, last(kernels, side="torch_lib"))):
        used = sorted({(r.get("env") or {}).get("blas_core") for r in rows if r.get("env")} - {None})
        if side == "PyTorch" and rows and not used:
            blas = sorted({(r.get("env") or {}).get("blas", "?") for r in rows})
            warn.append(f"PyTorch's BLAS is {', '.join(blas)}, not OpenBLAS: not a fair peer")
        best = lib.get("core") if lib else None
        cpu = lib.get("cpu_isa_level") if lib else None
        for core in used:
            if best and core != best:
                warn.append(f"{side} ran OpenBLAS core {core}; its library picks {best} on this CPU "
                            f"when OPENBLAS_CORETYPE is unset")
            lvl = isa_level(core)
            if cpu is not None and lvl is not None and lvl < cpu:
                warn.append(f"{side} ran OpenBLAS core {core} ({ISA_NAMES[lvl]} kernels), lesser than this "
                            f"CPU supports ({ISA_NAMES[cpu]}): a comparison against a handicapped side is "
                            f"not a result")
    return list(dict.fromkeys(warn))


def print_kernels(kernels, ours, torch, ort, ceil):
    oenv = next((r["env"] for r in ours if r.get("env")), {})
    tenv = next((r["env"] for r in torch if r.get("env")), {})
    lib = {k: last(kernels, side=k) or {} for k in ("anuvad_lib", "torch_lib")}
    if not (ours or torch or kernels):
        return
    print("### BLAS kernels and this machine's ceiling\n")
    print("| side | BLAS | OpenBLAS core used | the library's own choice here (no OPENBLAS_CORETYPE) |")
    print("|---|---|---|---|")
    if ours or lib["anuvad_lib"]:
        print(f"| anuvad | {oenv.get('gemm_backend', lib['anuvad_lib'].get('config', '?'))} "
              f"| {core_of(ours) or '-'} | {lib['anuvad_lib'].get('core') or '-'} |")
    if torch or lib["torch_lib"]:
        blas = f"{tenv.get('blas', '?')} ({tenv.get('blas_config', lib['torch_lib'].get('config', '?'))})"
        print(f"| PyTorch | {blas} | {core_of(torch) or '-'} | {lib['torch_lib'].get('core') or '-'} |")
    if ort:
        print(f"| ONNX Runtime | {ort[0].get('engine', '?')}: MLAS, its own kernels chosen by CPUID "
              f"(not OpenBLAS) | - | - |")
    cpu = lib["anuvad_lib"].get("cpu_isa_level", lib["torch_lib"].get("cpu_isa_level"))
    if cpu is not None:
        print(f"\nCPU instruction set (from /proc/cpuinfo): {ISA_NAMES[cpu]}.")
    fma = [r for r in ceil if r["mode"] == "ceiling_fma"]
    if fma:
        per = ", ".join(f"{r['config']} {fmt(r['fma_peak_gflops'])}" for r in fma)
        r = fma[-1]
        print(f"FMA peak at {r['threads']} threads (12 independent FMA chains per thread, FLOPs over the "
              f"threads' CPU time, best sample of each config's ceiling run): {per} GFLOP/s ({r['isa']}; AVX2 "
              f"{fmt(r['avx2_gflops'])}, AVX-512 {fmt(r['avx512_gflops'])} in the last run).")
        splits = [r for r in fma if r.get("team_split_us")]
        if splits:
            per = ", ".join(f"{r['config']} {r['team_split_us']:.2f}" for r in splits)
            print(f"Thread hand-off before each config (anuvad's empty StepTeam split, round trip, median of "
                  f"5 × 20,000): {per} µs (a few hundredths of a µs would mean both threads ran on one core).")
    print()


def print_ceiling(ceil, configs):
    rows = [r for r in ceil if r["mode"] == "ceiling"]
    if not rows:
        return
    print("#### Best GEMM rate on each workload's products\n")
    print("Products of the workload's linear layers on its real tokens (training: forward x·Wᵀ, dW = dYᵀ·X, "
          "dX = dY·W; decoding: the encoder once, then one row per sentence per step); each timed with "
          "OpenBLAS's cblas_sgemm and with anuvad::gemm, on 1 thread and split by rows across the threads; "
          "the best per product, weighted by its FLOPs (total FLOPs / Σ FLOPs / best rate). Rates are FLOPs "
          "over the busiest thread's CPU time, so other processes on the cores do not lower the ceiling; "
          "the benchmark's own rates are wall-clock: read them with the load average above.\n")
    print("| config | workload | rows (src / tgt) | products | best GEMM GFLOP/s | % of FMA peak "
          "| winning kernel (share of FLOPs) |")
    print("|---|---|---|---|---|---|---|")
    for c in configs:
        for w in ("train", "decode_b1", "decode_b64"):
            r = last(rows, config=c, workload=w)
            if not r:
                continue
            share = {}
            total = sum(2.0 * p["m"] * p["k"] * p["n"] * p["count"] for p in r["products"]) or 1
            for p in r["products"]:
                share[p["best_by"]] = share.get(p["best_by"], 0) + 2.0 * p["m"] * p["k"] * p["n"] * p["count"] / total
            wins = ", ".join(f"{k} {100 * v:.0f} %" for k, v in sorted(share.items(), key=lambda kv: -kv[1]))
            print(f"| {c} | {w} | {r['rows']['src']} / {r['rows']['tgt']} | {len(r['products'])} "
                  f"| {fmt(r['best_gemm_gflops'])} | {pct(frac(r['best_gemm_gflops'], r['fma_peak_gflops']))} "
                  f"| {wins} |")
    print()


def workload_of(mode):
    if mode == "train":
        return "train"
    if mode.startswith(("decode_naive_", "decode_cached_", "greedy_api_")):
        return "decode_b64" if mode.endswith("_b64") else "decode_b1"
    return None


def useful_gflops(a, b):
    """Median useful GFLOP/s of anuvad row a and torch row b of the same config and mode. torch's
    decoding figure is its tokens/s times anuvad's useful FLOPs per token of the same workload (64
    random sources of the same length distribution)."""
    ua = med(a.get("useful_gflops")) if a else None
    ub = None
    if b and b["mode"] == "train" and b.get("flops_per_tgt_token_useful"):
        ub = med(b["tgt_tokens_per_s"]) * b["flops_per_tgt_token_useful"] / 1e9
    elif b and a and a.get("flops_per_token_useful") and b.get("tokens_per_s"):
        ub = med(b["tokens_per_s"]) * a["flops_per_token_useful"] / 1e9
    return ua, ub


def print_useful(o, t, ceil, configs, modes):
    lines = []
    for c in configs:
        for m in modes:
            a, b = get(o, c, m), get(t, c, m)
            if not (a and a.get("useful_gflops")) and not b:
                continue
            ua, ub = useful_gflops(a, b)
            cl = last([r for r in ceil if r["mode"] == "ceiling"], config=c, workload=workload_of(m)) or {}
            peak, best = cl.get("fma_peak_gflops"), cl.get("best_gemm_gflops")
            lines.append(f"| {c} | {m} | {fmt(ua)} | {pct(frac(ua, peak))} | {pct(frac(ua, best))} "
                         f"| {fmt(ub)} | {pct(frac(ub, peak))} | {pct(frac(ub, best))} |")
    if not lines:
        return
    print("### Useful GFLOP/s against the ceiling\n")
    print("Useful = FLOPs on real tokens only (no padding; decoding: the cached minimum, no recomputed "
          "prefix), per second of the mode's wall time; as a fraction of the FMA peak and of the best "
          "GEMM rate on the workload's products (tables above). torch's decoding figures use anuvad's "
          "useful FLOPs per token of the same workload.\n")
    print("| config | mode | anuvad useful GFLOP/s | % of FMA peak | % of best GEMM "
          "| torch useful GFLOP/s | % of FMA peak | % of best GEMM |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(lines))
    print()


def median_min_max(values):
    """(median, min, max) of the numbers `values`, or None when there are none."""
    xs = sorted(values)
    return (xs[len(xs) // 2] if len(xs) % 2 else 0.5 * (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]),
            xs[0], xs[-1]) if xs else None


def over_rounds(rows):
    """(median, min, max) over rounds of the rows' median tokens/s, or None."""
    return median_min_max(med(r["tokens_per_s"]) for r in rows)


def compute_type(r):
    """anuvad_bench's --compute-type of row r (rows written before the flag: float32)."""
    return r.get("compute_type", "float32")


def print_ort(ort, vs_ort, configs):
    if not ort and not vs_ort:
        return
    print("### Cached greedy decoding against ONNX Runtime (alternated, run_vs_ort.sh)\n")
    print("Same workload on both sides (64 random sources of 10–14 tokens, 20 greedy tokens each, encoder "
          "included; batch 1: tiny/small 64 sentences, base 16). Each figure is the median over the "
          "alternated rounds (min–max) of each process's median tokens/s; ORT's best graph per row "
          "(std = torch.onnx.export, fused = ORT's contrib attention/LayerNorm ops), `--no-spin`. "
          "'ORT tokens = torch' compares ORT's tokens with torch_ref's cached greedy decoding.\n")
    print("anuvad's compute type: float32, bfloat16 or int8 (`--compute-types float32,bfloat16,int8`: "
          "every weight matrix rounded to bfloat16, or quantized per row to int8 with activations "
          "quantized per row), alternated within each round.\n")
    print("| config | mode | anuvad compute type | anuvad tok/s | ORT tok/s (best graph) | ours / ORT | ORT per graph "
          "| processes (anuvad / ORT) | anuvad peak RSS MiB | ORT peak RSS MiB | ORT tokens = torch |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    types = sorted({compute_type(r) for r in vs_ort} or {"float32"}, key=lambda t: (t != "float32", t))
    for c in configs:
        for m, ct in ((m, ct) for m in ("decode_cached_b1", "decode_cached_b64") for ct in types):
            a = [r for r in vs_ort if r["config"] == c and r["mode"] == m and compute_type(r) == ct]
            b = [r for r in ort if r["config"] == c and r["mode"] == m]
            if not a and (not b or ct != types[0]):
                continue
            sa = over_rounds(a)
            per = {}
            for v in sorted({r.get("variant", "?") for r in b}):
                per[v] = over_rounds([r for r in b if r.get("variant", "?") == v])
            best = max(per.items(), key=lambda kv: kv[1][0]) if per else None
            agree = [x for r in b for x in (r.get("torch_cached_token_agreement") or []) if x is not None]
            rng = lambda s: f"{fmt(s[0])} ({fmt(s[1])}–{fmt(s[2])})" if s else "-"
            print(f"| {c} | {m} | {ct} | {rng(sa)} | {rng(best[1]) if best else '-'} "
                  f"| {ratio(sa and sa[0], best and best[1][0])} "
                  f"| {', '.join(f'{v.split(chr(95))[0]} {fmt(x[0])}' for v, x in per.items()) or '-'} "
                  f"| {len(a)} / {len(b)} | {fmt(max((rss_of(r) for r in a), default=None))} "
                  f"| {fmt(max((rss_of(r) for r in b), default=None))} "
                  f"| {fmt(100 * min(agree), 1) + ' %' if agree else '-'} |")
    print()


def merge_rounds(rows, by_file=False):
    """rows with one row per key (row_key and results folder, and the file with by_file:
    PyTorch's runs with and without huge pages stay apart): a key measured in several processes
    of one folder (run_vs_torch.sh --rounds) becomes one row, the last one's fields with tokens/s,
    ms per sentence and useful GFLOP/s replaced by the median over the processes of each
    process's median (min–max: of those medians; "rounds": their number, which stat() shows) and
    the peak RSS by the largest; other rows pass unchanged."""
    groups = {}
    for r in rows:
        groups.setdefault(row_key(r) + (r.get("_dir"),) + ((r["_file"],) if by_file else ()), []).append(r)
    out = []
    for rs in groups.values():
        if len(rs) == 1:
            out.append(rs[0])
            continue
        m = dict(rs[-1], rounds=len(rs))
        for field in ("tokens_per_s", "ms_per_sentence", "useful_gflops"):
            if all(isinstance(r.get(field), dict) for r in rs):
                s = median_min_max(med(r[field]) for r in rs)
                m[field] = {"median": s[0], "min": s[1], "max": s[2], "rounds": len(rs)}
        for field in ("peak_rss_mib", "peak_rss_mib_so_far"):
            if field in m:
                m[field] = max(r.get(field) or 0 for r in rs)
        out.append(m)
    return out


def rounds_note(o, t):
    """A sentence saying how to read figures merged over --rounds, or '' when none is."""
    n = max([r.get("rounds", 1) for r in list(o.values()) + list(t.values())], default=1)
    return (" A figure marked '; N rounds' is the median over N alternated processes (--rounds) of each "
            "process's median tokens/s, and the min–max of those medians; unmarked figures are one "
            "process's median (min–max over its repeats).") if n > 1 else ""


def row_key(r):
    return (r["config"], r["mode"], r.get("length"), r.get("tokens_per_sentence"), compute_type(r))


def index(rs):
    return {row_key(r): r for r in rs}  # later rows win


def speed(r):
    """Row r's median throughput (target tokens/s for training, tokens/s for decoding)."""
    s = r.get("tgt_tokens_per_s") or r.get("tokens_per_s")
    return med(s) if isinstance(s, dict) else 0.0


def best_index(rs):
    """As index(), but of several rows for one key the fastest wins: run_vs_torch.sh runs
    PyTorch's decoding once with glibc's malloc on huge pages (*_hugepages.jsonl) and once
    without, so that each mode is compared against its faster setting."""
    out = {}
    for r in rs:
        key = row_key(r)
        if key not in out or speed(r) > speed(out[key]):
            out[key] = r
    return out


def huge_pages_note(torch, t):
    """A sentence on how often the huge-page run won among the decoding rows of best_index t,
    or '' when no torch decoding process ran on huge pages (torch: all torch rows)."""
    if not any(r["_file"].endswith("_hugepages.jsonl") for r in torch):
        return ""
    rows = [r for (c, m, *_), r in t.items() if m in DECODE_MODES]
    n = sum(1 for r in rows if r["_file"].endswith("_hugepages.jsonl"))
    return (" Each torch decoding row is the faster of two processes, one with glibc's malloc on "
            f"transparent huge pages and one without (huge pages faster in {n} of {len(rows)} rows).")


def get(ix, config, mode, ct="float32"):
    for (c, m, _, _, t), r in ix.items():
        if c == config and m == mode and t == ct:
            return r
    return None


def types_of(ix, config, mode):
    """The compute types of ix's rows for (config, mode), float32 first."""
    return sorted({t for (c, m, _, _, t) in ix if c == config and m == mode} or {"float32"},
                  key=lambda t: (t != "float32", t))


def print_setup(ours, torch):
    env = next((r["env"] for r in torch if "env" in r), None)
    oenv = next((r["env"] for r in ours if "env" in r), None)
    if env or oenv:
        print("Set-up: ", end="")
        parts = []
        if oenv:
            parts.append(f"anuvad: Eigen {oenv.get('eigen')} ({oenv.get('eigen_simd', '').split(',')[0]}), "
                         f"g++ {oenv.get('compiler')}, {oenv.get('requested_threads')} threads, {oenv.get('scalar')}")
        if env:
            parts.append(f"torch {env.get('torch')} (Python {env.get('python')}), BLAS {env.get('blas')} "
                         f"{env.get('blas_core', '')}, {env.get('torch_threads')} threads")
        print("; ".join(parts) + ".\n")


def print_load(dirs):
    loads = []
    for load_path in [os.path.join(d, "loadavg.tsv") for d in dirs]:
        if not os.path.exists(load_path):
            continue
        with open(load_path) as f:
            for line in f:
                p = line.rstrip("\n").split("\t")
                if len(p) >= 3 and p[0] != "time":
                    try:
                        loads.append(float(p[2]))
                    except ValueError:
                        pass
    if loads:
        print(f"1-minute load average before each benchmark process: min {min(loads):.2f}, "
              f"median {sorted(loads)[len(loads) // 2]:.2f}, max {max(loads):.2f} "
              f"(2 CPUs; the benchmark's own threads account for up to their number, more than that is "
              f"other work sharing the cores).\n")


def print_speed_tables(o, t, configs, hp_note=""):
    """Training and greedy decoding, both sides, with the ratios ours / torch."""
    # ---- training
    if any(get(o, c, "train") or get(t, c, "train") for c in configs):
        print("### Training: target tokens/s (batch 32 sentences, lengths U[5,20] incl. EOS)\n")
        print("| config | anuvad tgt tok/s | torch tgt tok/s | ours / torch | anuvad ms/step | torch ms/step "
              "| anuvad final loss | torch final loss |")
        print("|---|---|---|---|---|---|---|---|")
        for c in configs:
            a, b = get(o, c, "train"), get(t, c, "train")
            if not a and not b:
                continue
            print(f"| {c} | {stat(a and a['tgt_tokens_per_s'])} | {stat(b and b['tgt_tokens_per_s'])} "
                  f"| {ratio(a and med(a['tgt_tokens_per_s']), b and med(b['tgt_tokens_per_s']))} "
                  f"| {stat(a and a['ms_per_step'])} | {stat(b and b['ms_per_step'])} "
                  f"| {fmt(a and a.get('final_loss'), 2)} | {fmt(b and b.get('final_loss'), 2)} |")
        print()

    # ---- decoding
    if any(get(o, c, m) or get(t, c, m) for c in configs for m in DECODE_MODES):
        print("### Greedy decoding: tokens/s (64 sources of 10–14 tokens, 20 output tokens each, encoder included)\n")
        print("torch bfloat16 / int8: torch_bf16_decode.py (bfloat16: weights and activations in bfloat16, "
              "oneDNN, its best setting on CPUs with AVX-512 BF16; int8: quantize_dynamic of the decoder's "
              "and the generator's nn.Linear modules); '-' where not run. 'ours / torch best' divides by "
              "the fastest of torch's rows for that mode." + hp_note + "\n")
        print("| config | mode | anuvad compute type | anuvad tok/s | torch tok/s (float32) | ours / torch "
              "| torch bfloat16 tok/s | ours / torch bfloat16 | torch int8 tok/s | ours / torch int8 "
              "| ours / torch best | anuvad tokens = naive b1 |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for c in configs:
            for m in DECODE_MODES:
                for ct in types_of(o, c, m):
                    a, b = get(o, c, m, ct), get(t, c, m)
                    if not a and not b:
                        continue
                    tb, ti = get(t, c, m, "bfloat16"), get(t, c, m, "int8")
                    best = max((med(r["tokens_per_s"]) for r in (b, tb, ti) if r), default=None)
                    agree = a.get("token_agreement_with_naive_b1") if a else None
                    ours = a and med(a["tokens_per_s"])
                    print(f"| {c} | {m} | {ct} | {stat(a and a['tokens_per_s'])} | {stat(b and b['tokens_per_s'])} "
                          f"| {ratio(ours, b and med(b['tokens_per_s']))} "
                          f"| {stat(tb and tb['tokens_per_s'])} | {ratio(ours, tb and med(tb['tokens_per_s']))} "
                          f"| {stat(ti and ti['tokens_per_s'])} | {ratio(ours, ti and med(ti['tokens_per_s']))} "
                          f"| {ratio(ours, best)} "
                          f"| {fmt(100 * agree, 1) + ' %' if agree is not None else '-'} |")
        print()


def print_rss(o, t, configs):
    if any(get(o, c, m) or get(t, c, m) for c in configs for m in ["train"] + DECODE_MODES):
        print("### Peak RSS per mode, MiB\n")
        print("anuvad: VmHWM of a process that ran only that mode. torch: ru_maxrss of torch_ref's process; "
              "its 4 decode modes share one process (order naive b1, cached b1, naive b64, cached b64), so a "
              "decode figure is the peak up to and including that mode.\n")
        print("| config | mode | anuvad compute type | anuvad | torch | ours / torch |")
        print("|---|---|---|---|---|---|")
        for c in configs:
            for m in ["train"] + DECODE_MODES:
                for ct in types_of(o, c, m):
                    a, b = get(o, c, m, ct), get(t, c, m)
                    if not a and not b:
                        continue
                    print(f"| {c} | {m} | {ct} | {fmt(rss_of(a))} | {fmt(rss_of(b))} | {ratio(rss_of(a), rss_of(b))} |")
        print()


def print_extras(o, ox, t, ours, configs):
    """The anuvad-only modes: beam_search, output-length and sentence-length scaling."""
    # ---- anuvad-only: greedy API and beam search
    extra_modes = ["greedy_api_b1", "greedy_api_b64", "beam4_cached_b1", "beam4_cached_b64"]
    if any(get(o, c, m) for c in configs for m in extra_modes):
        print("### anuvad: beam_search (greedy and beam 4), tokens/s, exactly 20 output tokens per sentence "
              "(EOS logit −1e9)\n")
        print("Output tokens only (a beam-4 sentence counts 20, not 80). 'vs cached greedy' = this mode's "
              "tokens/s over decode_cached at the same batch size (hand-driven decode_step + argmax), "
              "measured just before it in the same run when the run had --extras.\n")
        print("| config | mode | anuvad tok/s | vs cached greedy | vs torch cached greedy | peak RSS MiB |")
        print("|---|---|---|---|---|---|")
        for c in configs:
            for m in extra_modes:
                a = get(o, c, m)
                if not a:
                    continue
                bsz = m.rsplit("_", 1)[1]
                g, tg = get(ox, c, "decode_cached_" + bsz), get(t, c, "decode_cached_" + bsz)
                print(f"| {c} | {m} | {stat(a['tokens_per_s'])} "
                      f"| {ratio(med(a['tokens_per_s']), g and med(g['tokens_per_s']))} "
                      f"| {ratio(med(a['tokens_per_s']), tg and med(tg['tokens_per_s']))} | {fmt(rss_of(a))} |")
        print()

    lens = sorted([r for r in ours if r["mode"] == "decode_length"],
                  key=lambda r: (CONFIG_ORDER.get(r["config"], 9), r["tokens_per_sentence"]))
    if lens:
        print("### anuvad: output-length scaling, cached greedy, batch 1 (per-token time)\n")
        print("| config | output tokens | tokens/s | ms per token | mean decode_step ms, first 10 steps "
              "| mean decode_step ms, last 10 steps | peak RSS MiB |")
        print("|---|---|---|---|---|---|---|")
        for r in lens:
            print(f"| {r['config']} | {r['tokens_per_sentence']} | {stat(r['tokens_per_s'])} "
                  f"| {stat(r['ms_per_token'], 3)} | {fmt(r['step_ms_first10'], 3)} | {fmt(r['step_ms_last10'], 3)} "
                  f"| {fmt(rss_of(r))} |")
        print()

    scale = [r for r in ours if r["mode"] in ("scale_train", "scale_decode")]
    if scale:
        print("### anuvad: sentence-length scaling (source = target = L tokens incl. EOS)\n")
        print("Training: one step (forward, backward, Adam) on the given number of sentence pairs. "
              "Translation: cached greedy at batch 1, L-token source → L output tokens. Each cell is its "
              "own process (peak RSS per length).\n")
        print("| config | L | train sentences | train ms/step | train tgt tok/s | train peak RSS MiB "
              "| translate ms/sentence | translate tok/s | translate peak RSS MiB |")
        print("|---|---|---|---|---|---|---|---|---|")
        keys = sorted({(r["config"], r["length"]) for r in scale},
                      key=lambda k: (CONFIG_ORDER.get(k[0], 9), k[1]))
        for c, L in keys:
            tr = next((r for r in scale if r["config"] == c and r["length"] == L and r["mode"] == "scale_train"), None)
            de = next((r for r in scale if r["config"] == c and r["length"] == L and r["mode"] == "scale_decode"), None)
            print(f"| {c} | {L} | {tr['batch_sentences'] if tr else '-'} | {stat(tr and tr['ms_per_step'])} "
                  f"| {stat(tr and tr['tgt_tokens_per_s'])} | {fmt(rss_of(tr))} "
                  f"| {stat(de and de['ms_per_sentence'])} | {stat(de and de['tokens_per_s'])} | {fmt(rss_of(de))} |")
        print()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    args = ap.parse_args()
    rows = [r for d in args.dirs for r in load_dir(d)]
    if not rows:
        print(f"no JSON lines under {' '.join(args.dirs)}", file=sys.stderr)
        return 1
    kernels = [r for r in rows if "side" in r]
    ceil = [r for r in rows if r.get("impl") == "anuvad" and r.get("mode") in ("ceiling", "ceiling_fma")]
    ort = [r for r in rows if str(r.get("engine", "")).startswith("onnxruntime")]
    ours = [r for r in rows if r.get("impl") == "anuvad" and "mode" in r and r not in ceil]
    torch = [r for r in rows if r.get("impl") != "anuvad" and "mode" in r and "engine" not in r]

    # extras.jsonl (run_vs_torch.sh --extras) has its own decode_cached rows, measured next to the
    # beam_search modes; the main tables prefer the main run's rows when both are present.
    # vs_ort.jsonl (run_vs_ort.sh) has decode_cached rows alternated with ONNX Runtime's; they
    # fill the main tables only when the main run has no such row.
    main_rows = [r for r in ours if r["_file"] not in ("extras.jsonl", "vs_ort.jsonl")]
    extra_rows = [r for r in ours if r["_file"] == "extras.jsonl"]
    vs_ort = [r for r in ours if r["_file"] == "vs_ort.jsonl"]
    main_rows = merge_rounds(main_rows)  # --rounds: one row per key, medians over the rounds
    o = index(vs_ort + extra_rows + main_rows)  # later rows win
    ox = index(main_rows + extra_rows)
    t = best_index(merge_rounds(torch, by_file=True))
    configs = sorted({r["config"] for r in rows if "config" in r}, key=lambda c: CONFIG_ORDER.get(c, 9))

    warnings = kernel_warnings(kernels, ours, torch)
    for w in warnings:
        print(f"> **WARNING**: {w}.\n")
    print_setup(ours, torch)
    print_load(args.dirs)
    print_kernels(kernels, ours, torch, ort, ceil)
    print_ceiling(ceil, configs)

    print_speed_tables(o, t, configs, huge_pages_note(torch, t) + rounds_note(o, t))
    print_useful(o, t, ceil, configs, ["train"] + DECODE_MODES)
    print_rss(o, t, configs)
    print_ort(ort, vs_ort, configs)
    print_extras(o, ox, t, ours, configs)
    sys.stdout.flush()
    for w in warnings:
        sys.stderr.write(f"WARNING: {w}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
