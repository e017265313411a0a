#!/usr/bin/env python3
"""An anuvad model run from docs/model-format.md alone ("Running the model"), with numpy.

Written from the document, not from anuvad's C++: the safetensors file is parsed with json and
numpy, the text is normalized and encoded with the SentencePiece models stored in the file
(Debian's python3-sentencepiece), and the forward pass (embeddings, positions, attention, layer
norms, output projection) is computed in float64. The test trains two small models with
different layouts (pre-norm with a tied output projection; post-norm, untied, another ε and
head count) on TRAIN.tsv (100 epochs of tests/data/cli/tiny.tsv: a few seconds; vocabulary
sizes chosen for it), and checks, on the training pairs and on DEV.tsv (unseen sentences, many
characters unknown to the vocabularies):
  - (both with --compute-type float32: the document's arithmetic, not bfloat16's rounding)
  - every per-token log-probability and every total of `anuvad score --word-scores` (relative
    tolerance TOL, default 1e-3);
  - greedy translations (`anuvad translate --word-scores --max-length-factor 0.5`): the same
    text and word scores, with the document's length limit (the training sentences mostly end
    with EOS, the unseen ones mostly run into the limit; both must occur), the tokens never
    emitted and log-probabilities that are not renormalised. The last two only show when those
    tokens are likely, so the greedy check runs again on a copy of the first model whose
    output_projection.bias favours PAD, UNK and BOS by +8 (nats).

Usage: reimplement.py ANUVAD TRAIN.tsv DEV.tsv [TOL]
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import unicodedata

import numpy as np
import sentencepiece

PAD, UNK, BOS, EOS = 0, 1, 2, 3


# --- The file -----------------------------------------------------------------------------------

def read_safetensors(path):
    """(tensors, metadata): F32 tensors as float64 arrays, U8 tensors as bytes."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    metadata = header.pop("__metadata__", {})
    data = blob[8 + n:]
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        raw = data[begin:end]
        if entry["dtype"] == "F32":
            tensors[name] = np.frombuffer(raw, dtype="<f4").astype(np.float64).reshape(entry["shape"])
        elif entry["dtype"] == "U8":
            tensors[name] = bytes(raw)
        else:
            raise ValueError(f"{path}: tensor {name}: unexpected dtype {entry['dtype']}")
    return tensors, metadata


def normalize(text, rule):
    """The text_normalization rule: nfc-spaces (NFC, White_Space → space, no U+FEFF, runs of
    spaces collapsed, ends trimmed) or identity."""
    if rule == "identity":
        return text
    text = unicodedata.normalize("NFC", text).replace("\ufeff", "")
    return " ".join(text.split())  # str.split() splits on Unicode whitespace


# --- The network --------------------------------------------------------------------------------

class Model:
    def __init__(self, path):
        self.w, meta = read_safetensors(path)
        self.cfg = json.loads(meta["config"])
        self.rule = meta.get("text_normalization", "identity")
        self.sp_src = sentencepiece.SentencePieceProcessor(model_proto=self.w["tokenizer.src"])
        self.sp_tgt = sentencepiece.SentencePieceProcessor(model_proto=self.w["tokenizer.tgt"])
        self.D, self.H = self.cfg["d_model"], self.cfg["n_heads"]
        self.eps = self.cfg["layer_norm_eps"]
        self.pre = self.cfg["norm"] == "pre"
        self.out_w = self.w["decoder.embed_tokens.weight"] if self.cfg["tie_output"] else self.w["output_projection.weight"]
        self.out_b = self.w["output_projection.bias"]

    def linear(self, name, x):
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def layer_norm(self, name, x):
        mu = x.mean(axis=-1, keepdims=True)
        var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
        return self.w[name + ".weight"] * (x - mu) / np.sqrt(var + self.eps) + self.w[name + ".bias"]

    def embed(self, table, ids):
        D = self.D
        pos = np.arange(len(ids))[:, None]
        i2 = np.arange(0, D, 2)[None, :]
        angle = pos / np.power(10000.0, i2 / D)
        pe = np.zeros((len(ids), D))
        pe[:, 0::2] = np.sin(angle)
        pe[:, 1::2] = np.cos(angle)
        return self.w[table][ids] * math.sqrt(D) + pe

    def attention(self, name, xq, xkv, causal):
        q, k, v = self.linear(name + ".q_proj", xq), self.linear(name + ".k_proj", xkv), self.linear(name + ".v_proj", xkv)
        dh = self.D // self.H
        out = np.zeros_like(q)
        for h in range(self.H):
            cols = slice(h * dh, (h + 1) * dh)
            s = q[:, cols] @ k[:, cols].T / math.sqrt(dh)
            if causal:
                s = np.where(np.tril(np.ones(s.shape, dtype=bool)), s, -np.inf)
            p = np.exp(s - s.max(axis=1, keepdims=True))
            out[:, cols] = (p / p.sum(axis=1, keepdims=True)) @ v[:, cols]
        return self.linear(name + ".out_proj", out)

    def ffn(self, name, x):
        return self.linear(name + ".linear2", np.maximum(0.0, self.linear(name + ".linear1", x)))

    def sublayer(self, norm, x, f):
        """Pre-norm: x + f(LN(x)); post-norm: LN(x + f(x))."""
        return x + f(self.layer_norm(norm, x)) if self.pre else self.layer_norm(norm, x + f(x))

    def encode(self, src_ids):
        x = self.embed("encoder.embed_tokens.weight", src_ids + [EOS])
        for i in range(self.cfg["encoder_layers"]):
            p = f"encoder.layers.{i}"
            x = self.sublayer(p + ".self_attn_norm", x, lambda y: self.attention(p + ".self_attn", y, y, False))
            x = self.sublayer(p + ".ffn_norm", x, lambda y: self.ffn(p + ".ffn", y))
        return self.layer_norm("encoder.norm", x) if self.pre else x

    def log_probs(self, memory, dec_in):
        """Log-softmax over the whole target vocabulary at every decoder position: [T, V]."""
        y = self.embed("decoder.embed_tokens.weight", dec_in)
        for i in range(self.cfg["decoder_layers"]):
            p = f"decoder.layers.{i}"
            y = self.sublayer(p + ".self_attn_norm", y, lambda z: self.attention(p + ".self_attn", z, z, True))
            y = self.sublayer(p + ".cross_attn_norm", y, lambda z: self.attention(p + ".cross_attn", z, memory, False))
            y = self.sublayer(p + ".ffn_norm", y, lambda z: self.ffn(p + ".ffn", z))
        if self.pre:
            y = self.layer_norm("decoder.norm", y)
        logits = y @ self.out_w.T + self.out_b
        m = logits.max(axis=1, keepdims=True)
        return logits - m - np.log(np.exp(logits - m).sum(axis=1, keepdims=True))

    def src_ids(self, text):
        return self.sp_src.encode(normalize(text, self.rule))

    def score(self, src, tgt):
        """Log-probability of each target id and of EOS (teacher forcing)."""
        y = self.sp_tgt.encode(normalize(tgt, self.rule))
        lp = self.log_probs(self.encode(self.src_ids(src)), [BOS] + y)
        return [lp[t, tok] for t, tok in enumerate(y + [EOS])]

    def greedy(self, src, factor=2.0, max_length=256):
        """(text, word scores, whether the limit ended it without EOS, smallest margin between a
        chosen token and the runner-up)."""
        ids = self.src_ids(src)[: self.cfg["max_positions"] - 1]
        limit = max(0, min(int(min(factor * (len(ids) + 1) + 10, max_length)), self.cfg["max_positions"] - 1))
        memory = self.encode(ids)
        out, scores, margin = [], [], math.inf
        for _ in range(limit):
            lp = self.log_probs(memory, [BOS] + out)[-1].copy()
            lp[[PAD, BOS, UNK]] = -np.inf  # never emitted; not renormalised
            best, second = np.argsort(-lp, kind="stable")[:2]
            margin = min(margin, lp[best] - lp[second])
            scores.append(lp[best])
            if best == EOS:
                return self.sp_tgt.decode(out), scores, False, margin
            out.append(int(best))
        return self.sp_tgt.decode(out), scores, True, margin


# --- The test -----------------------------------------------------------------------------------

def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def anuvad_lines(args, stdin_text):
    r = subprocess.run([anuvad] + args, input=stdin_text, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"anuvad {' '.join(args)}: exit {r.returncode}: {r.stderr}")
    return r.stdout.splitlines()


def relative_error(ours, theirs):
    return abs(ours - theirs) / max(1.0, abs(theirs))


def check_scores(model_path, pairs, tol):
    model = Model(model_path)
    out = anuvad_lines(["score", "-m", model_path, "--word-scores", "--compute-type", "float32"], "".join(f"{s}\t{t}\n" for s, t in pairs))
    if len(out) != len(pairs):
        fail(f"score printed {len(out)} lines for {len(pairs)} pairs")
    worst = 0.0
    for (src, tgt), line in zip(pairs, out):
        total, words = line.split(" ||| WordScores= ")
        theirs = [float(x) for x in words.split()]
        ours = model.score(src, tgt)
        if len(ours) != len(theirs):
            fail(f"{src!r}: {len(ours)} target tokens here, {len(theirs)} in anuvad score")
        for a, b in zip(ours + [sum(ours)], theirs + [float(total)]):
            worst = max(worst, relative_error(a, b))
            if relative_error(a, b) > tol:
                fail(f"{src!r} → {tgt!r}: log-probability {a:.6f} here, {b:.6f} in anuvad score")
    print(f"{os.path.basename(model_path)}: score of {len(pairs)} pairs, largest relative difference {worst:.2e}")
    return model


def check_greedy(model, model_path, sources, tol):
    out = anuvad_lines(["translate", "-m", model_path, "--word-scores", "--max-length-factor", "0.5",
                        "--compute-type", "float32"],
                       "".join(s + "\n" for s in sources))
    same = near_ties = at_limit = with_eos = 0
    worst = 0.0
    for src, line in zip(sources, out):
        text, words = line.split(" ||| WordScores= ")
        theirs = [float(x) for x in words.split()]
        ours_text, ours, hit_limit, margin = model.greedy(src, factor=0.5)
        if margin < 1e-4 and (ours_text != text or len(ours) != len(theirs)):
            near_ties += 1  # float32 and float64 may break a near-tie differently
            continue
        if ours_text != text or len(ours) != len(theirs):
            fail(f"{src!r}: greedy gives {ours_text!r} ({len(ours)} scores) here, {text!r} ({len(theirs)}) in anuvad")
        for a, b in zip(ours, theirs):
            worst = max(worst, relative_error(a, b))
            if relative_error(a, b) > tol:
                fail(f"{src!r}: word score {a:.6f} here, {b:.6f} in anuvad translate")
        same += 1
        at_limit += hit_limit
        with_eos += not hit_limit
    if same < 0.9 * len(sources):
        fail(f"greedy: only {same} of {len(sources)} translations compared ({near_ties} near ties)")
    if at_limit == 0 or with_eos == 0:
        fail(f"greedy: {at_limit} translations reached the length limit and {with_eos} ended with EOS: "
             "both cases must occur")
    print(f"{os.path.basename(model_path)}: greedy translation of {len(sources)} sources: {same} identical "
          f"(word scores within {worst:.2e}; {with_eos} ended with EOS, {at_limit} by the length limit), "
          f"{near_ties} near ties skipped")


def boost_specials(src, dst, boost=8.0):
    """Copies the model file `src` to `dst` with output_projection.bias[PAD, UNK, BOS] += boost."""
    with open(src, "rb") as f:
        blob = bytearray(f.read())
    (n,) = struct.unpack("<Q", blob[:8])
    begin, end = json.loads(blob[8:8 + n])["output_projection.bias"]["data_offsets"]
    at = 8 + n + begin
    bias = np.frombuffer(bytes(blob[at:8 + n + end]), dtype="<f4").copy()
    bias[[PAD, UNK, BOS]] += boost
    blob[at:8 + n + end] = bias.astype("<f4").tobytes()
    with open(dst, "wb") as f:
        f.write(blob)


CONFIGS = {
    # Pre-norm, tied output projection, 4 heads of 8.
    "pre_tied": {"d_model": 32, "n_heads": 4, "d_ff": 64, "encoder_layers": 2, "decoder_layers": 2,
                 "norm": "pre", "tie_output": True, "max_positions": 64},
    # Post-norm, separate output projection, a larger ε (its place matters more), 2 heads of 16.
    "post_untied": {"d_model": 32, "n_heads": 2, "d_ff": 48, "encoder_layers": 1, "decoder_layers": 2,
                    "norm": "post", "tie_output": False, "layer_norm_eps": 1e-3, "max_positions": 64},
}

if __name__ == "__main__":
    anuvad, train_tsv, dev_tsv = sys.argv[1:4]
    tol = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-3
    pairs = []
    for path in (train_tsv, dev_tsv):
        with open(path, encoding="utf-8") as f:
            pairs += [tuple(line.rstrip("\n").split("\t")) for line in f if line.strip()]
    with tempfile.TemporaryDirectory() as d:
        for name, config in CONFIGS.items():
            with open(f"{d}/{name}.json", "w") as f:
                json.dump(config, f)
            model_path = f"{d}/{name}.safetensors"
            anuvad_lines(["train", "--train-sets", train_tsv, "--no-valid", "-c", f"{d}/{name}.json",
                          "--after-epochs", "100", "--warmup-steps", "20", "-l", "3e-3",
                          "--src-vocab-size", "60", "--tgt-vocab-size", "80", "-q", "--disp-freq", "0",
                          "-m", model_path], "")
            model = check_scores(model_path, pairs, tol)
            check_greedy(model, model_path, [s for s, _ in pairs], tol)
            if name == "pre_tied":
                boosted = f"{d}/pre_tied_specials_boosted.safetensors"
                boost_specials(model_path, boosted)
                check_greedy(Model(boosted), boosted, [s for s, _ in pairs], tol)
    print("model format reimplementation OK")
