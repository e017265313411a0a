#!/usr/bin/env python3
"""`translate --word-scores` and `score --word-scores` of the same greedy output agree per token.

The decoder's log-probabilities while generating (KV-cached path) must equal forced decoding of
the output (teacher-forced path) within TOL, on every line whose output `score` sees as the same
subwords. `score` re-tokenizes text (README "score"), so an output the decoder spelled with a
non-canonical segmentation is scored as other tokens, sometimes as many of them. Which lines
those are is decided from the ids themselves: the ids the decoder emitted (`--attention` dump,
docs/attention.md) against the output re-encoded with the model's own target SentencePiece
model (the `tokenizer.tgt` bytes of the file, docs/model-format.md) after the model's
text_normalization. Lines that differ are counted as re-segmented and skipped; at least half of
the lines must be compared.

Both commands run with --compute-type COMPUTE_TYPE (default float32). In bfloat16 on a CPU with
AVX-512 BF16 every product's activations are rounded to bfloat16, so a float32 difference in the
last bits between the two paths (other sum orders) can flip a rounding and move a score by a few
1e-3 nats: its tolerance is wider.

Usage: scores_agree.py ANUVAD MODEL CORPUS.tsv TOL [COMPUTE_TYPE]
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import unicodedata

import sentencepiece


def tokenizer_and_rule(path):
    """(SentencePiece processor of the target side, text_normalization rule) of a model file."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    begin, end = header["tokenizer.tgt"]["data_offsets"]
    proto = blob[8 + n + begin:8 + n + end]
    rule = header.get("__metadata__", {}).get("text_normalization", "identity")
    return sentencepiece.SentencePieceProcessor(model_proto=proto), rule


def normalize(text, rule):
    """nfc-spaces: NFC, no U+FEFF, White_Space runs → one space, ends trimmed; or identity."""
    if rule == "identity":
        return text
    return " ".join(unicodedata.normalize("NFC", text).replace("\ufeff", "").split())


def word_scores(lines):
    return [[float(s) for s in line.split(" ||| WordScores= ")[1].split()] for line in lines]


def main(anuvad, model, corpus, tol, compute_type="float32"):
    with open(corpus, encoding="utf-8") as f:
        sources = [line.rstrip("\n").split("\t")[0] for line in f]
    src_text = "".join(s + "\n" for s in sources)
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "attention.json")
        out = subprocess.run([anuvad, "translate", "-m", model, "--word-scores", "--attention", dump,
                              "--compute-type", compute_type],
                             input=src_text, capture_output=True, text=True, check=True).stdout.splitlines()
        with open(dump, encoding="utf-8") as f:
            sentences = json.load(f)["sentences"]
    hyps = [line.split(" ||| WordScores= ")[0] for line in out]
    generated = word_scores(out)
    pairs = "".join(f"{s}\t{h}\n" for s, h in zip(sources, hyps))
    forced = word_scores(subprocess.run([anuvad, "score", "-m", model, "--word-scores",
                                         "--compute-type", compute_type], input=pairs,
                                        capture_output=True, text=True, check=True).stdout.splitlines())
    assert len(hyps) == len(sources) == len(sentences) == len(forced), "one output per input line"

    sp, rule = tokenizer_and_rule(model)
    compared = resegmented = 0
    worst = 0.0
    for hyp, sent, gen, frc in zip(hyps, sentences, generated, forced):
        emitted = [t["id"] for t in sent["tgt_tokens"]]
        assert len(emitted) == len(gen), f"{hyp!r}: {len(emitted)} tokens in the dump, {len(gen)} word scores"
        if emitted[:-1] != sp.encode(normalize(hyp, rule)) or emitted[-1] != 3:
            resegmented += 1  # score sees other subwords (or the length limit cut the output)
            continue
        compared += 1
        worst = max([worst] + [abs(g - f) for g, f in zip(gen, frc)])
    n = len(sources)
    print(f"{compute_type}: {n} lines: {compared} compared, {resegmented} re-segmented or unfinished; "
          f"largest |difference| {worst:.2e} (tolerance {tol:g})")
    return 0 if compared >= n / 2 and worst <= tol else 1


if __name__ == "__main__":
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), *sys.argv[5:]))
