#!/usr/bin/python3
"""Independent PyTorch reference of the anuvad transformer, in float64.

Reads an anuvad model file (safetensors) with its own small reader, rebuilds the network from
the paper (Vaswani et al. 2017, "Attention Is All You Need") in idiomatic torch rather than by
porting src/*.cpp, runs one fixed padded batch teacher-forced, and writes a JSON fixture with
everything tests/reference_test.cpp compares against the C++ core:

  batch        the examples and the padded layout of anuvad::make_batch
  logits       [B*T, V]    row b*T + t
  loss         label-smoothed (0.1) cross-entropy, mean over non-PAD target tokens
  memory       [B*S, D]    encoder output
  gradients    d loss / d parameter for every parameter, by its anuvad name, row-major
               (Linear weights [out, in] as torch.nn.Linear)
  attention    encoder[l].self [B*H*S, S], decoder[l].self [B*H*T, T], decoder[l].cross
               [B*H*T, S]; row (b*H + h)*Tq + i

All rows are written, including those of PAD queries; only rows of real queries are meaningful
(the loss never reads the others), so the C++ test compares those only.

Usage: torch_reference.py [--models DIR] [--out DIR] [--which pre post]
(defaults: tests/data/reference for both; run from the repository root, or use
tests/reference/regenerate.sh). Requires Debian's python3-torch and python3-numpy.
"""

import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

PAD, UNK, BOS, EOS = 0, 1, 2, 3
LABEL_SMOOTHING = 0.1
torch.set_default_dtype(torch.float64)

# --------------------------------------------------------------------------------------------
# safetensors reader: u64 LE header length N, N bytes of JSON header, then the raw data section.

_DTYPES = {"F32": np.float32, "F64": np.float64, "U8": np.uint8}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        dtype = np.dtype(_DTYPES[info["dtype"]]).newbyteorder("<")
        arr = np.frombuffer(data[begin:end], dtype=dtype).reshape(info["shape"])
        tensors[name] = arr
    return metadata, tensors


# --------------------------------------------------------------------------------------------
# The model, written from the paper.


def sinusoidal_positions(n_positions, d_model):
    """PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d))  (§3.5)."""
    pos = torch.arange(n_positions, dtype=torch.float64).unsqueeze(1)
    inv_freq = torch.pow(10000.0, -torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(pos * inv_freq)
    pe[:, 1::2] = torch.cos(pos * inv_freq)
    return pe


class Reference:
    def __init__(self, cfg, weights):
        self.cfg = cfg
        self.d = cfg["d_model"]
        self.h = cfg["n_heads"]
        self.eps = cfg["layer_norm_eps"]
        self.pre = cfg["norm"] == "pre"
        self.p = {name: torch.tensor(np.asarray(w, dtype=np.float64), requires_grad=True)
                  for name, w in weights.items()}
        self.attn = {}  # name -> probs [B, H, Tq, Tk]

    # -- building blocks ---------------------------------------------------------------------
    def linear(self, x, prefix):
        return F.linear(x, self.p[prefix + ".weight"], self.p[prefix + ".bias"])

    def layer_norm(self, x, prefix):
        return F.layer_norm(x, (self.d,), self.p[prefix + ".weight"], self.p[prefix + ".bias"],
                            self.eps)

    def embed(self, ids, prefix):
        """Token embedding × √d_model plus sinusoidal positions (§3.4, §3.5)."""
        e = F.embedding(ids, self.p[prefix + ".weight"]) * math.sqrt(self.d)
        return e + sinusoidal_positions(ids.shape[1], self.d).unsqueeze(0)

    def attention(self, x_q, x_kv, prefix, allowed, record):
        """Multi-head attention (§3.2.2). allowed: bool [B, 1, Tq, Tk], True = may attend."""
        B, Tq, _ = x_q.shape
        Tk = x_kv.shape[1]
        dh = self.d // self.h

        def heads(t, n):
            return t.view(B, n, self.h, dh).transpose(1, 2)  # [B, H, n, dh]

        q = heads(self.linear(x_q, prefix + ".q_proj"), Tq)
        k = heads(self.linear(x_kv, prefix + ".k_proj"), Tk)
        v = heads(self.linear(x_kv, prefix + ".v_proj"), Tk)
        scores = q @ k.transpose(-2, -1) / math.sqrt(dh)  # Eq. 1, scaled by 1/√d_k
        # A query that may see no key at all gets zero weights (softmax of an all −inf row is
        # NaN, and so is its gradient): unmask such rows for the softmax, then zero them.
        any_key = allowed.any(dim=-1, keepdim=True)
        probs = F.softmax(scores.masked_fill(~(allowed | ~any_key), float("-inf")), dim=-1)
        probs = probs.masked_fill(~any_key, 0.0)
        self.attn[record] = probs
        ctx = (probs @ v).transpose(1, 2).reshape(B, Tq, self.d)  # concatenate heads
        return self.linear(ctx, prefix + ".out_proj")

    def ffn(self, x, prefix):
        """FFN(x) = max(0, x W1 + b1) W2 + b2  (Eq. 2)."""
        return self.linear(F.relu(self.linear(x, prefix + ".linear1")), prefix + ".linear2")

    def sublayer(self, x, norm_prefix, f):
        """Post-norm LayerNorm(x + f(x)) (§3.1), or pre-norm x + f(LayerNorm(x))."""
        if self.pre:
            return x + f(self.layer_norm(x, norm_prefix))
        return self.layer_norm(x + f(x), norm_prefix)

    # -- the network ---------------------------------------------------------------------------
    def encode(self, src, src_key_ok):
        B, S = src.shape
        enc_mask = src_key_ok[:, None, None, :].expand(B, 1, S, S)
        x = self.embed(src, "encoder.embed_tokens")
        for l in range(self.cfg["encoder_layers"]):
            pre = f"encoder.layers.{l}"
            x = self.sublayer(x, pre + ".self_attn_norm",
                              lambda y: self.attention(y, y, pre + ".self_attn", enc_mask,
                                                       f"enc.{l}.self"))
            x = self.sublayer(x, pre + ".ffn_norm", lambda y: self.ffn(y, pre + ".ffn"))
        if self.pre:
            x = self.layer_norm(x, "encoder.norm")
        return x

    def decode(self, tgt_in, tgt_key_ok, memory, src_key_ok):
        B, T = tgt_in.shape
        S = memory.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        self_mask = (causal[None, None] & tgt_key_ok[:, None, None, :])
        cross_mask = src_key_ok[:, None, None, :].expand(B, 1, T, S)
        x = self.embed(tgt_in, "decoder.embed_tokens")
        for l in range(self.cfg["decoder_layers"]):
            pre = f"decoder.layers.{l}"
            x = self.sublayer(x, pre + ".self_attn_norm",
                              lambda y: self.attention(y, y, pre + ".self_attn", self_mask,
                                                       f"dec.{l}.self"))
            x = self.sublayer(x, pre + ".cross_attn_norm",
                              lambda y: self.attention(y, memory, pre + ".cross_attn",
                                                       cross_mask, f"dec.{l}.cross"))
            x = self.sublayer(x, pre + ".ffn_norm", lambda y: self.ffn(y, pre + ".ffn"))
        if self.pre:
            x = self.layer_norm(x, "decoder.norm")
        out_w = (self.p["decoder.embed_tokens.weight"] if self.cfg["tie_output"]
                 else self.p["output_projection.weight"])
        return F.linear(x, out_w, self.p["output_projection.bias"])


# --------------------------------------------------------------------------------------------
# The fixed batch.


def fixed_examples(src_vocab, tgt_vocab):
    """3 pairs: source lengths 5, 3, 1 and target lengths 4, 6, 2 subwords (EOS/BOS excluded),
    ids drawn deterministically from [4, V) (0..3 are PAD, UNK, BOS, EOS)."""
    g = torch.Generator().manual_seed(20240607)

    def ids(n, v):
        return (torch.randint(4, v, (n,), generator=g)).tolist()

    return [{"src": ids(5, src_vocab), "tgt": ids(4, tgt_vocab)},
            {"src": ids(3, src_vocab), "tgt": ids(6, tgt_vocab)},
            {"src": ids(1, src_vocab), "tgt": ids(2, tgt_vocab)}]


def make_batch(examples):
    """Right-padded layout of anuvad::make_batch (include/anuvad/nn/batch.h)."""
    src_lengths = [len(e["src"]) + 1 for e in examples]
    tgt_lengths = [len(e["tgt"]) + 1 for e in examples]
    S, T = max(src_lengths), max(tgt_lengths)
    src, tgt_in, tgt_out = [], [], []
    for e in examples:
        s = e["src"] + [EOS]
        src.append(s + [PAD] * (S - len(s)))
        ti = [BOS] + e["tgt"]
        tgt_in.append(ti + [PAD] * (T - len(ti)))
        to = e["tgt"] + [EOS]
        tgt_out.append(to + [PAD] * (T - len(to)))
    return {"B": len(examples), "S": S, "T": T, "src_lengths": src_lengths,
            "tgt_lengths": tgt_lengths, "src": src, "tgt_in": tgt_in, "tgt_out": tgt_out}


# --------------------------------------------------------------------------------------------


def flat(t):
    """Row-major flattened values, rounded to 12 significant digits (keeps the file small)."""
    return [float(f"{v:.12g}") for v in t.detach().reshape(-1).tolist()]


def run(model_path, out_path):
    metadata, tensors = read_safetensors(model_path)
    if metadata.get("format") != "anuvad":
        sys.exit(f"{model_path}: not an anuvad model file")
    cfg = json.loads(metadata["config"])
    weights = {k: v for k, v in tensors.items() if not k.startswith("tokenizer.")}
    ref = Reference(cfg, weights)

    examples = fixed_examples(cfg["src_vocab_size"], cfg["tgt_vocab_size"])
    batch = make_batch(examples)
    B, S, T, V, H = batch["B"], batch["S"], batch["T"], cfg["tgt_vocab_size"], cfg["n_heads"]
    src = torch.tensor(batch["src"])
    tgt_in = torch.tensor(batch["tgt_in"])
    tgt_out = torch.tensor(batch["tgt_out"])
    # Key padding masks from the lengths: position j of sentence b is real iff j < length[b].
    src_key_ok = torch.arange(S)[None, :] < torch.tensor(batch["src_lengths"])[:, None]
    tgt_key_ok = torch.arange(T)[None, :] < torch.tensor(batch["tgt_lengths"])[:, None]

    memory = ref.encode(src, src_key_ok)
    logits = ref.decode(tgt_in, tgt_key_ok, memory, src_key_ok)
    flat_logits = logits.reshape(B * T, V)
    loss = F.cross_entropy(flat_logits, tgt_out.reshape(-1), ignore_index=PAD,
                           label_smoothing=LABEL_SMOOTHING, reduction="mean")

    # Cross-check torch's label smoothing + ignore_index against the formula of loss.h.
    with torch.no_grad():
        logp = F.log_softmax(flat_logits, dim=-1)
        y = tgt_out.reshape(-1)
        real = y != PAD
        nll = -logp[real].gather(1, y[real].unsqueeze(1)).squeeze(1)
        smooth = -logp[real].mean(dim=1)
        manual = ((1 - LABEL_SMOOTHING) * nll + LABEL_SMOOTHING * smooth).mean()
        assert abs(manual.item() - loss.item()) < 1e-12, (manual.item(), loss.item())

    loss.backward()

    attention = {"encoder": [], "decoder": []}
    for l in range(cfg["encoder_layers"]):
        attention["encoder"].append({"self": flat(ref.attn[f"enc.{l}.self"].reshape(B * H * S, S))})
    for l in range(cfg["decoder_layers"]):
        attention["decoder"].append({
            "self": flat(ref.attn[f"dec.{l}.self"].reshape(B * H * T, T)),
            "cross": flat(ref.attn[f"dec.{l}.cross"].reshape(B * H * T, S))})

    fixture = {
        "description": "anuvad PyTorch reference (tests/reference/torch_reference.py), float64",
        "model": os.path.basename(model_path),
        "config": cfg,
        "label_smoothing": LABEL_SMOOTHING,
        "examples": examples,
        "batch": batch,
        "logits": flat(flat_logits),
        "loss": loss.item(),
        "n_tgt_tokens": int(sum(batch["tgt_lengths"])),
        "memory": flat(memory.reshape(B * S, -1)),
        "attention": attention,
        "gradients": {name: flat(p.grad) for name, p in sorted(ref.p.items())},
        "shapes": {name: list(p.shape) for name, p in sorted(ref.p.items())},
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(fixture, f, separators=(",", ":"))
        f.write("\n")
    print(f"{out_path}: loss {loss.item():.6f}, {len(ref.p)} parameters, "
          f"{os.path.getsize(out_path)} bytes")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="tests/data/reference")
    ap.add_argument("--out", default="tests/data/reference")
    ap.add_argument("--which", nargs="+", default=["pre", "post"])
    args = ap.parse_args()
    for which in args.which:
        run(os.path.join(args.models, f"model_{which}.safetensors"),
            os.path.join(args.out, f"fixture_{which}.json"))


if __name__ == "__main__":
    main()
