#!/usr/bin/env python3
"""Splits the hand-written English–Hindi pairs into data/{train,dev,test}.tsv.

Used once to make the bundled corpus (see data/README.md); kept so the split can be redone.
Input: TSV files of `english<TAB>hindi` (the writers' raw parts). Pairs are NFC-normalised, English
duplicates are dropped (first wins), then a seeded shuffle assigns 100 pairs to dev, 100 to test and
the rest to train, so no English sentence is in two files. Required sentences stay in train.
Usage: python3 tests/tools/split_corpus.py RAW.tsv [RAW.tsv ...]
"""
import random
import sys
import unicodedata

REQUIRED_IN_TRAIN = {"How are you?", "We are friends.", "I like eating ice cream."}


def main(paths):
    pairs, seen = [], set()
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                en, hi = unicodedata.normalize("NFC", line.rstrip("\n")).split("\t")
                en, hi = en.strip(), hi.strip()
                if en.lower() in seen:
                    continue
                seen.add(en.lower())
                pairs.append((en, hi))
    rng = random.Random(20261129)
    pinned = [p for p in pairs if p[0] in REQUIRED_IN_TRAIN]
    rest = [p for p in pairs if p[0] not in REQUIRED_IN_TRAIN]
    rng.shuffle(rest)
    dev, test, train = rest[:100], rest[100:200], rest[200:] + pinned
    for name, part in (("train", train), ("dev", dev), ("test", test)):
        with open(f"data/{name}.tsv", "w", encoding="utf-8") as f:
            for en, hi in sorted(part):
                f.write(f"{en}\t{hi}\n")
        print(name, len(part))


if __name__ == "__main__":
    main(sys.argv[1:])
