#!/usr/bin/env python3
"""torch_ref.py's cached greedy decoding (same model, seed, sources and greedy_cached) with the
weights and every activation in bfloat16: Debian's torch 1.13 runs bfloat16 nn.Linear through
oneDNN's AVX-512 BF16 kernels on CPUs that have them (2-5x its float32 OpenBLAS GEMM rate on
this project's shapes, measured on Zen 4), so on such a CPU this is PyTorch's best setting for
translation at batch 64 and for base at batch 1. One JSON line per mode (decode_cached_b1,
decode_cached_b64) with "compute_type": "bfloat16", read by summarize.py beside torch_ref.py's
float32 rows. run_vs_torch.sh runs it when --compute-types includes bfloat16.

--dtype int8: PyTorch's own int8 path instead, dynamic quantization
(torch.ao.quantization.quantize_dynamic of every nn.Linear to qint8 weights, activations
quantized per call; Debian's torch 1.13 runs it on its "onednn" quantized engine, the default,
with AVX-512 VNNI where the CPU has it) of the decoder's feed-forward layers and attention
output projections and of the generator (the encoder stays float32: see below); the Q/K/V projections, which torch_ref's cached decoder calls
as F.linear on in_proj_weight, stay float32 (what quantize_dynamic gives a torch user of
nn.Transformer). "compute_type": "int8"; run_vs_torch.sh runs it when --compute-types includes
int8.

usage: PYTHONPATH=<folder of torch_ref.py> torch_bf16_decode.py --config small [--threads 2] [--dtype int8]
"""
import argparse
import json
import time

import torch
import torch_ref as R

ap = argparse.ArgumentParser()
ap.add_argument("--config", default="small")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--repeats", type=int, default=3)
ap.add_argument("--dtype", choices=("bfloat16", "int8"), default="bfloat16")
a = ap.parse_args()
R.seed_everything(1234)
R.set_threads(a.threads)
cfg = R.CONFIGS[a.config]
model = R.Seq2SeqTransformer(**{k: cfg[k] for k in ("d_model", "n_heads", "d_ff", "enc_layers", "dec_layers",
                                                    "src_vocab", "tgt_vocab")}, norm="post")
model.eval()
sents = [R.random_sentence(*R.DECODE_SRC_LEN, cfg["src_vocab"]) for _ in range(R.DECODE_SENTENCES)]
if a.dtype == "int8":
    # NonDynamicallyQuantizableLinear (MultiheadAttention.out_proj) is an nn.Linear subclass that
    # the default mapping skips; map it too, so every Linear module runs in int8.
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear
    mapping = {torch.nn.Linear: DynamicLinear,
               torch.nn.modules.linear.NonDynamicallyQuantizableLinear: DynamicLinear}
    # The decoder and the generator only: torch 1.13's TransformerEncoderLayer fast-path check
    # fails on quantized modules (AttributeError: 'function' object has no attribute 'is_cuda'),
    # so the encoder, run once per sentence, stays float32.
    for name in ("decoder", "generator"):
        setattr(model, name, torch.ao.quantization.quantize_dynamic(
            getattr(model, name), set(mapping), dtype=torch.qint8, mapping=mapping))
else:
    model = model.to(torch.bfloat16)
    torch.set_default_dtype(torch.bfloat16)
for batch in (1, 64):
    n_sent = cfg["bs1_sentences"] if batch == 1 else R.DECODE_SENTENCES
    batches = [R.pad(sents[i:i + batch]) for i in range(0, n_sent, batch)]
    with torch.inference_mode():
        R.greedy_cached(model, R.pad(sents[:1]), 3)
        times = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            for b in batches:
                R.greedy_cached(model, b, R.DECODE_MAX_LEN)
            times.append(time.perf_counter() - t0)
    tps = sorted(n_sent * R.DECODE_MAX_LEN / t for t in times)
    print(json.dumps({"impl": "torch", "config": a.config, "mode": f"decode_cached_b{batch}",
                      "compute_type": a.dtype, "batch_size": batch, "sentences": n_sent,
                      "tokens_per_s": {"median": round(tps[len(tps) // 2], 1), "min": round(tps[0], 1), "max": round(tps[-1], 1)}}))
