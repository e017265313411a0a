#!/usr/bin/env python3
"""`translate --beam-trace` changes no output and agrees with `--n-best` and `--word-scores`.

For greedy search and beam 4 on the source side of CORPUS.tsv: the output of `translate` with
and without `--beam-trace` (and `--html`, which records the trace for the page) is byte for byte
the same; in the trace (docs/attention.md, docs/beam-trace-schema.json), each sentence's
`n_best` hypotheses are the `--n-best` lines of that sentence in the same order, with the same
F0 score, normalized score and word scores (the log-probabilities along the hypothesis's path;
within the trace's 6 significant digits), and the same text (the path's pieces joined); the
n-best list is `finished` ranked by normalized score; greedy traces are one path; candidates are
sorted by log-probability with at most --beam-trace-top below that rank, the others kept or
finished; a kept candidate is a hypothesis of the next step.

Usage: beam_trace_agrees.py ANUVAD MODEL CORPUS.tsv
"""
import json
import os
import subprocess
import sys
import tempfile

TOP = 3


def run(anuvad, model, sources, *flags):
    cmd = [anuvad, "translate", "-m", model, "--cpu-threads", "1", *flags]
    return subprocess.run(cmd, input=sources, capture_output=True, text=True, check=True).stdout


def close(a, b):
    return abs(a - b) <= 1e-6 + 2e-5 * abs(b)


def path(trace, fid):
    """(pieces, logprobs) from the first token to finished hypothesis fid."""
    hyps = {h["id"]: h for step in trace["steps"] for h in step}
    fin = {f["id"]: f for f in trace["finished"]}[fid]
    pieces, logprobs, p = [fin["piece"]], [fin["logprob"]], fin["parent"]
    while p:  # the start (id 0) has no token of the output
        pieces.insert(0, hyps[p]["piece"])
        logprobs.insert(0, hyps[p]["logprob"])
        p = hyps[p]["parent"]
    return pieces, logprobs, fin


def check_structure(trace, beam, where):
    errors = []
    ids = {h["id"] for step in trace["steps"] for h in step}
    for t, step in enumerate(trace["steps"]):
        if beam == 1 and len(step) != 1:
            errors.append(f"{where} step {t}: {len(step)} hypotheses in a greedy trace")
        for h in step:
            cands = h["candidates"]
            lps = [c["logprob"] for c in cands]
            ranks = [c["rank"] for c in cands]
            if lps != sorted(lps, reverse=True) or ranks != sorted(set(ranks)):
                errors.append(f"{where} step {t}: candidates not sorted")
            if sum(r < TOP for r in ranks) > TOP or any(c["status"] == "pruned" for c in cands if c["rank"] >= TOP):
                errors.append(f"{where} step {t}: --beam-trace-top {TOP} not respected")
            for c in cands:
                if c["status"] == "kept" and t + 1 < len(trace["steps"]) and c["id"] not in ids:
                    errors.append(f"{where} step {t}: kept candidate {c['id']} is no hypothesis")
    return errors


def check_sentence(trace, lines, beam, where):
    errors = check_structure(trace, beam, where)
    ranked = sorted(trace["finished"], key=lambda f: -f["normalized"])  # stable: ties keep order
    if [f["normalized"] for f in ranked[:len(trace["n_best"])]] != \
            [{f["id"]: f for f in trace["finished"]}[i]["normalized"] for i in trace["n_best"]]:
        errors.append(f"{where}: n_best is not `finished` ranked by normalized score")
    if len(lines) != len(trace["n_best"]):
        return errors + [f"{where}: {len(lines)} --n-best lines, {len(trace['n_best'])} in the trace"]
    for rank, (line, fid) in enumerate(zip(lines, trace["n_best"])):
        fields = line.split(" ||| ")
        text, words = fields[1], [float(x) for x in fields[2].split("WordScores=")[1].split()]
        f0, normalized = float(fields[3].split("F0=")[1]), float(fields[4])
        pieces, logprobs, fin = path(trace, fid)
        if fin["eos"]:
            pieces = pieces[:-1]
        joined = "".join(pieces).replace("\u2581", " ").strip()
        if joined != text:
            errors.append(f"{where} rank {rank}: trace text {joined!r} != {text!r}")
        if len(words) != len(logprobs) or not all(close(a, b) for a, b in zip(words, logprobs)):
            errors.append(f"{where} rank {rank}: word scores {words} != trace {logprobs}")
        if not close(f0, fin["score"]) or not close(normalized, fin["normalized"]):
            errors.append(f"{where} rank {rank}: F0 {f0} / {normalized} != trace {fin['score']} / {fin['normalized']}")
    return errors


def main(anuvad, model, corpus):
    with open(corpus, encoding="utf-8") as f:
        sources = "".join(line.split("\t")[0].rstrip("\n") + "\n" for line in f)
    errors, compared = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        trace_file, html = os.path.join(tmp, "trace.json"), os.path.join(tmp, "page.html")
        for beam in (1, 4):
            flags = ["-b", str(beam), "-n", "0.6", "--n-best", "--word-scores"]
            plain = run(anuvad, model, sources, "-b", str(beam))
            if run(anuvad, model, sources, "-b", str(beam), "--beam-trace", trace_file, "--html", html) != plain:
                errors.append(f"beam {beam}: --beam-trace/--html changed the translations")
            n_best = run(anuvad, model, sources, *flags)
            if run(anuvad, model, sources, *flags, "--beam-trace", trace_file, "--beam-trace-top", str(TOP)) != n_best:
                errors.append(f"beam {beam}: --beam-trace changed the --n-best output")
            with open(trace_file, encoding="utf-8") as f:
                doc = json.load(f)
            by_sentence = {}
            for line in n_best.splitlines():
                by_sentence.setdefault(int(line.split(" ||| ")[0]), []).append(line)
            for i, s in enumerate(doc["sentences"]):
                if s["beam_trace"]["steps"]:
                    errors += check_sentence(s["beam_trace"], by_sentence.get(i, []), beam, f"beam {beam} sentence {i}")
                    compared += 1
    for e in errors[:20]:
        print("FAIL:", e)
    print(f"{compared} sentence traces compared, {len(errors)} error(s)")
    return 1 if errors or compared == 0 else 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
