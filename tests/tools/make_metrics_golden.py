#!/usr/bin/env python3
"""Writes tests/data/metrics/golden.json: BLEU, chrF2, chrF2++ and exact match of hand-written
English and Hindi hypothesis/reference pairs, computed by the independent Python re-implementation
of sacreBLEU 2.x in the shared bench folder (metrics.py, checked there against sacreBLEU's own
published test values). tests/metrics_test.cpp compares anuvad's C++ metrics with this file.

shared/ is not part of the repository, so this script is only for regenerating the committed
JSON; the tests and CI never run it.  From the repository root:

    python3 tests/tools/make_metrics_golden.py            # reads ../shared/bench/metrics.py
    python3 tests/tools/make_metrics_golden.py --metrics /path/to/metrics.py

BLEU is written twice: "bleu_13a" is metrics.py's plain 13a tokenization (= sacreBLEU), and
"bleu" is anuvad's default "13a+danda": the Devanagari danda (U+0964) and double danda (U+0965)
are split off as punctuation before 13a runs. Splitting them off first is the same as adding
them to 13a's first (symbol) rule, which is how the C++ code does it: that rule pads each
matching character with spaces independently of its neighbours, and the steps that run before
it (<skipped>, "-\\n", newline and HTML-entity replacement) neither contain nor form a danda.
"""
import argparse
import hashlib
import importlib.util
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_METRICS = os.path.join(REPO, "..", "shared", "bench", "metrics.py")
OUT = os.path.join(REPO, "tests", "data", "metrics", "golden.json")

# (language, hypothesis, reference). Kinds: exact matches, partial matches, empty hypotheses,
# one-word references, hypotheses longer than their reference, 13a corner cases (numbers,
# dashes, HTML entities, brackets, quotes), Unicode whitespace, and a character outside the
# Basic Multilingual Plane (one code point, two UTF-16 units, four UTF-8 bytes).
PAIRS = [
    ("en", "The dog bit the man.", "The dog bit the man."),
    ("en", "It wasn't surprising.", "It was not unexpected."),
    ("en", "The man had just bitten him.", "The man bit him first."),
    ("en", "", "Good morning."),
    ("en", "Hello", "Hello"),
    ("en", "Hi there", "Hello"),
    ("en", "I like tea and coffee very much.", "I like tea."),
    ("en", "It costs 3.50 dollars, not 4,000.", "It costs 3.5 dollars - not 4,000!"),
    ("en", "Pages 10-12 (see below) &amp; \"notes\".", "Pages 10 - 12 (see below) & \"notes\"."),
    ("en", "  Where   is the\tschool?  ", "Where is the school?"),
    ("en", "He said: 'go home'.", "He said: \"Go home.\""),
    ("en", "The sky is blue", "The sky is blue."),
    ("en", "a b c d e f g h", "a b c d e f g h"),
    ("en", "café\u00a0au lait 😀", "café au lait 😀!"),
    ("en", "", ""),
    ("hi", "मैं ठीक हूँ।", "मैं ठीक हूँ।"),
    ("hi", "मैं ठीक हूँ", "मैं ठीक हूँ।"),
    ("hi", "वह घर गया।", "वह घर जा रहा है।"),
    ("hi", "मुझे चाय पसंद है।", "मुझे चाय बहुत पसंद है।"),
    ("hi", "", "धन्यवाद।"),
    ("hi", "धन्यवाद।", "धन्यवाद।"),
    ("hi", "शुक्रिया", "धन्यवाद।"),
    ("hi", "आप कैसे हैं?", "आप कैसे हैं?"),
    ("hi", "तुम कहाँ हो ?", "आप कहाँ हैं?"),
    ("hi", "सूरज गरम है। पानी ठंडा है।", "सूरज गरम है।पानी ठंडा है।"),
    ("hi", "राम ने कहा॥ सीता चुप रही॥", "राम ने कहा। सीता चुप रही॥"),
    ("hi", "दस का आधा पाँच होता है।", "दस का आधा ५ होता है।"),
    ("hi", "बिल्ली सो रही है", "बिल्ली सो रही है।"),
    ("hi", "कुत्ता भौंक रहा है, बिल्ली भाग रही है।", "कुत्ता भौंक रहा है और बिल्ली भाग रही है।"),
    ("hi", "घोड़े खड़े-खड़े सो सकते हैं।", "घोड़े खड़े - खड़े सो सकते हैं।"),
    ("hi", "यह मेरा घर है।", "यह मेरा घर है।"),
    ("hi", "मेरा नाम रवि है।", "मेरा नाम (रवि) है।"),
]

# Strings whose tokenizations are checked one by one.
TOKENIZE = [
    "Hello, world! It's 3.5-4 (ok).",
    "वह घर गया।",
    "राम ने कहा॥सीता",
    "a.,b 1,000.5 x-1 1-x &lt;tag&gt; <skipped>done",
    "line one-\nline two\nend",
    "  spaces\u00a0and\u3000ideographic  ",
]


def load_metrics(path):
    spec = importlib.util.spec_from_file_location("bench_metrics", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metrics", default=DEFAULT_METRICS, help="path of the bench metrics.py")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    m = load_metrics(args.metrics)
    if not m.self_check(verbose=False):
        sys.exit("metrics.py self-check failed")

    def tok_danda(line):
        return m.tokenize_13a(line.replace("\u0964", " \u0964 ").replace("\u0965", " \u0965 "))

    def bleu_danda(hyps, refs):
        # sacreBLEU tokenizes line.rstrip(); "none" then only splits the pre-tokenized text.
        return m.bleu([tok_danda(h.rstrip()) for h in hyps], [[tok_danda(r.rstrip()) for r in refs]],
                      tokenize="none", details=True)

    def chrf_stats(hyps, refs, word_order):
        total = [0] * (3 * (6 + word_order))
        for h, r in zip(hyps, refs):
            st = m.chrf_segment_stats(h, [r], word_order=word_order)
            total = [a + b for a, b in zip(total, st)]
        return total

    def scores(hyps, refs):
        b, d = bleu_danda(hyps, refs)
        b13, d13 = m.bleu(hyps, [refs], details=True)
        return {
            "bleu": b, "bleu_counts": d["counts"], "bleu_totals": d["totals"],
            "bleu_sys_len": d["sys_len"], "bleu_ref_len": d["ref_len"],
            "bleu_13a": b13, "bleu_13a_counts": d13["counts"], "bleu_13a_totals": d13["totals"],
            "chrf": m.chrf(hyps, [refs]), "chrf_stats": chrf_stats(hyps, refs, 0),
            "chrfpp": m.chrf(hyps, [refs], word_order=2), "chrfpp_stats": chrf_stats(hyps, refs, 2),
            "exact": m.exact_match(hyps, [refs]),
        }

    pairs = []
    for lang, h, r in PAIRS:
        e = {"lang": lang, "hyp": h, "ref": r}
        e.update(scores([h], [r]))
        pairs.append(e)
    corpora = []
    for name, sel in [("all", lambda p: True), ("en", lambda p: p[0] == "en"), ("hi", lambda p: p[0] == "hi")]:
        idx = [i for i, p in enumerate(PAIRS) if sel(p)]
        e = {"name": name, "indices": idx}
        e.update(scores([PAIRS[i][1] for i in idx], [PAIRS[i][2] for i in idx]))
        corpora.append(e)
    toks = [{"text": t, "13a": m.tokenize_13a(t), "13a+danda": tok_danda(t)} for t in TOKENIZE]

    with open(args.metrics, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    doc = {
        "about": "Generated by tests/tools/make_metrics_golden.py from shared/bench/metrics.py "
                 "(sacreBLEU 2.x re-implementation); scores are 0-100. Per pair: that pair as a "
                 "one-line corpus. bleu = 13a+danda tokenization (anuvad's default), bleu_13a = plain 13a.",
        "metrics_py_sha256": digest,
        "pairs": pairs,
        "corpora": corpora,
        "tokenize": toks,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {args.out}: {len(pairs)} pairs, {len(corpora)} corpora")


if __name__ == "__main__":
    main()
