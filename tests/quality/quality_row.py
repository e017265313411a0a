#!/usr/bin/env python3
"""Markdown for tests/quality/run_quality.sh, read from a training run's JSON-lines log.

  quality_row.py row NAME PRESET SECONDS REPORT EXTRA GREEDY_JSON BEAM_JSON LOG.jsonl [TRAIN_EXACT]
      one table row: corpus, preset (+ extra flags), how training ended and which model -m is,
      wall-clock training time, the report split, greedy and beam 4 chrF2 / BLEU / exact %
      (from `anuvad evaluate --json`), and the exact-match % on the training pairs when given.
  quality_row.py curve NAME LOG.jsonl
      the dev curve: step, epoch, every validation metric, * on a new best of the first metric.
"""
import json
import sys


def events(log):
    with open(log, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def epoch_at(evs, step):
    """The epoch of the last training event at or before `step`."""
    epoch = "?"
    for e in evs:
        if e["event"] == "train" and e["step"] <= step:
            epoch = e["epoch"]
    return epoch


def summary(evs):
    start = next(e for e in evs if e["event"] == "start")
    end = next(e for e in reversed(evs) if e["event"] == "end")
    training = start["config"]["training"]
    first = training["valid_metrics"][0] if training["valid_sets"] else None
    valids = [e for e in evs if e["event"] == "valid"]
    how = "early stopping" if end["early_stopped"] else ("interrupted" if end["interrupted"] else "limit")
    text = f"{end['epochs']} epochs, {end['steps']} updates ({how})"
    if training["final_model"] == "best" and first:
        best = [e["step"] for e in valids if first in e.get("improved", [])]
        if best:
            text += f"; -m = best dev {first}, update {best[-1]} (epoch {epoch_at(evs, best[-1])})"
    else:
        text += "; -m = last weights"
    return text, end


def row(name, preset, secs, report, extra, greedy, beam, log, train_exact=None):
    g, b = json.loads(greedy), json.loads(beam)
    text, end = summary(events(log))
    m, s = divmod(int(secs), 60)
    flags = f" {extra}" if extra.strip() else ""
    exact = f" | {train_exact}" if train_exact else " | -"
    print(f"| {name} | {preset}{flags} | {text} | {m}:{s:02d} | {report} | "
          f"{g['chrf']['score']:.1f} / {g['bleu']['score']:.1f} / {g['exact_match']['percent']:.1f} | "
          f"{b['chrf']['score']:.1f} / {b['bleu']['score']:.1f} / {b['exact_match']['percent']:.1f}{exact} |")


def curve(name, log):
    evs = events(log)
    valids = [e for e in evs if e["event"] == "valid"]
    if not valids:
        print(f"\n{name}: no validation.")
        return
    chosen = next(e for e in evs if e["event"] == "start")["config"]["training"]["valid_metrics"]
    first = chosen[0]
    metrics = [k for k in chosen if k in valids[0]["metrics"]]
    metrics += [k for k in valids[0]["metrics"] if k not in metrics]
    print(f"\nDev curve of {name} (* = new best dev {first}):\n")
    print("| step | epoch | " + " | ".join(metrics) + " |")
    print("|---|---|" + "---|" * len(metrics))
    for e in valids:
        cells = [f"{e['metrics'][k]:.4f}" if k == "cross-entropy" else f"{e['metrics'][k]:.2f}"
                 for k in metrics]
        i = metrics.index(first)
        if first in e.get("improved", []):
            cells[i] += " *"
        print(f"| {e['step']} | {epoch_at(evs, e['step'])} | " + " | ".join(cells) + " |")
    _, end = summary(evs)
    print(f"\n{end['epochs']} epochs, {end['steps']} updates in {end['elapsed_s']:.0f} s of training, "
          f"{end['tgt_tokens_per_s']:.0f} target tokens/s.")


if __name__ == "__main__":
    if len(sys.argv) >= 10 and sys.argv[1] == "row":
        row(*sys.argv[2:])
    elif len(sys.argv) == 4 and sys.argv[1] == "curve":
        curve(*sys.argv[2:])
    else:
        sys.exit(__doc__)
