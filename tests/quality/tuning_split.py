#!/usr/bin/env python3
"""Carve a tuning split from a training TSV by source sentence (issue #16: choices are made on it,
never on dev or test). Every pair whose English side was drawn goes to the tuning split, so no
English sentence is in both parts.

usage: tuning_split.py TRAIN.tsv OUT_DIR [--sentences 260] [--seed 7]
writes OUT_DIR/train.tsv (the rest) and OUT_DIR/tune.tsv, and prints their sizes. On
../shared/corpora/tatoeba-hin-eng/train.tsv the defaults give 285 tuning pairs and 2256 training
pairs: the split of docs/quality.md's session-12 and session-13 rows.
"""
import argparse
import os
import random


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("train")
    ap.add_argument("out_dir")
    ap.add_argument("--sentences", type=int, default=260, help="English sentences to draw")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    with open(a.train, encoding="utf-8") as f:
        pairs = [line.rstrip("\n") for line in f if line.strip()]
    sources = sorted({p.split("\t", 1)[0] for p in pairs})
    tune = set(random.Random(a.seed).sample(sources, a.sentences))
    os.makedirs(a.out_dir, exist_ok=True)
    kept = {"train": [], "tune": []}
    for p in pairs:
        kept["tune" if p.split("\t", 1)[0] in tune else "train"].append(p)
    for name, lines in kept.items():
        with open(os.path.join(a.out_dir, name + ".tsv"), "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
        print(f"{name}.tsv: {len(lines)} pairs")


if __name__ == "__main__":
    main()
