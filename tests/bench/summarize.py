#!/usr/bin/env python3
"""Markdown tables of an anuvad-vs-PyTorch benchmark folder written by run_vs_torch.sh.

    python3 tests/bench/summarize.py RESULTS_DIR [RESULTS_DIR ...]

Reads every *.jsonl under each RESULTS_DIR (recursively; several folders are merged, e.g. a main
run and an --only-extras run). A line with "impl": "anuvad" comes from
anuvad_bench, any other line with a "mode" from ../shared/bench/torch_ref.py. Prints:
training (target tokens/s), greedy decoding (tokens/s), peak RSS per mode, each with the ratio
ours / torch, then the anuvad-only tables (greedy through beam_search, beam 4, output-length
scaling, sentence-length scaling) when those modes were run. Every figure is the median (min–max)
over the repeats inside one process. RESULTS_DIR/loadavg.tsv (written by run_vs_torch.sh) gives
the load average seen before each process started.
"""
import argparse
import json
import os
import sys

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
    return f"{fmt(s['median'], digits)} ({fmt(s['min'], digits)}–{fmt(s['max'], digits)})"


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    args = ap.parse_args()
    rows = [r for d in args.dirs for r in load_dir(d)]
    if not rows:
        print(f"no JSON lines under {' '.join(args.dirs)}", file=sys.stderr)
        return 1
    ours = [r for r in rows if r.get("impl") == "anuvad" and "mode" in r]
    torch = [r for r in rows if r.get("impl") != "anuvad" and "mode" in r]

    def index(rs):
        out = {}
        for r in rs:
            key = (r["config"], r["mode"], r.get("length"), r.get("tokens_per_sentence"))
            out[key] = r
        return out

    # extras.jsonl (run_vs_torch.sh --extras) has its own decode_cached rows, measured next to the
    # beam_search modes; the main tables prefer the main run's rows when both are present.
    main_rows = [r for r in ours if r["_file"] != "extras.jsonl"]
    extra_rows = [r for r in ours if r["_file"] == "extras.jsonl"]
    o = index(extra_rows + main_rows)  # later rows win
    ox = index(main_rows + extra_rows)
    t = index(torch)
    configs = sorted({r["config"] for r in rows if "config" in r}, key=lambda c: CONFIG_ORDER.get(c, 9))

    def get(ix, config, mode):
        for (c, m, _, _), r in ix.items():
            if c == config and m == mode:
                return r
        return None

    env = next((r["env"] for r in torch if "env" in r), None)
    oenv = next((r["env"] for r in ours if "env" in r), None)
    if env or oenv:
        print("Set-up: ", end="")
        parts = []
        if oenv:
            parts.append(f"anuvad: Eigen {oenv.get('eigen')} ({oenv.get('eigen_simd', '').split(',')[0]}), "
                         f"g++ {oenv.get('compiler')}, {oenv.get('eigen_threads')} threads, {oenv.get('scalar')}")
        if env:
            parts.append(f"torch {env.get('torch')} (Python {env.get('python')}), BLAS {env.get('blas')} "
                         f"{env.get('blas_core', '')}, {env.get('torch_threads')} threads")
        print("; ".join(parts) + ".\n")

    loads = []
    for load_path in [os.path.join(d, "loadavg.tsv") for d in args.dirs]:
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

    # ---- training
    if any(get(o, c, "train") or get(t, c, "train") for c in configs):
        print("### Training: target tokens/s (batch 32 sentences, lengths U[5,20] incl. EOS)\n")
        print("| config | anuvad tgt tok/s | torch tgt tok/s | ours / torch | anuvad ms/step | torch ms/step "
              "| anuvad GFLOP/s (executed) | torch GFLOP/s | anuvad final loss | torch final loss |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for c in configs:
            a, b = get(o, c, "train"), get(t, c, "train")
            if not a and not b:
                continue
            print(f"| {c} | {stat(a and a['tgt_tokens_per_s'])} | {stat(b and b['tgt_tokens_per_s'])} "
                  f"| {ratio(a and med(a['tgt_tokens_per_s']), b and med(b['tgt_tokens_per_s']))} "
                  f"| {stat(a and a['ms_per_step'])} | {stat(b and b['ms_per_step'])} "
                  f"| {stat(a and a.get('achieved_gflops_executed'))} | {stat(b and b.get('achieved_gflops_executed'))} "
                  f"| {fmt(a and a.get('final_loss'), 2)} | {fmt(b and b.get('final_loss'), 2)} |")
        print()

    # ---- decoding
    if any(get(o, c, m) or get(t, c, m) for c in configs for m in DECODE_MODES):
        print("### Greedy decoding: tokens/s (64 sources of 10–14 tokens, 20 output tokens each, encoder included)\n")
        print("| config | mode | anuvad tok/s | torch tok/s | ours / torch | anuvad tokens = naive b1 |")
        print("|---|---|---|---|---|---|")
        for c in configs:
            for m in DECODE_MODES:
                a, b = get(o, c, m), get(t, c, m)
                if not a and not b:
                    continue
                agree = a.get("token_agreement_with_naive_b1") if a else None
                print(f"| {c} | {m} | {stat(a and a['tokens_per_s'])} | {stat(b and b['tokens_per_s'])} "
                      f"| {ratio(a and med(a['tokens_per_s']), b and med(b['tokens_per_s']))} "
                      f"| {fmt(100 * agree, 1) + ' %' if agree is not None else '-'} |")
        print()

        print("### Peak RSS per mode, MiB\n")
        print("anuvad: VmHWM of a process that ran only that mode. torch: ru_maxrss of torch_ref's process; "
              "its 4 decode modes share one process (order naive b1, cached b1, naive b64, cached b64), so a "
              "decode figure is the peak up to and including that mode.\n")
        print("| config | mode | anuvad | torch | ours / torch |")
        print("|---|---|---|---|---|")
        for c in configs:
            for m in ["train"] + DECODE_MODES:
                a, b = get(o, c, m), get(t, c, m)
                if not a and not b:
                    continue
                print(f"| {c} | {m} | {fmt(rss_of(a))} | {fmt(rss_of(b))} | {ratio(rss_of(a), rss_of(b))} |")
        print()

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
    return 0


if __name__ == "__main__":
    sys.exit(main())
