#!/usr/bin/env python3
"""The structured training log (docs/training-log.md), end to end, with the standard library only.

1. A run with validation: every line of <stem>.log.jsonl is a JSON object with the documented
   fields and types; "train" events at every update (--disp-freq 1) with steps 1, 2, 3, ...;
   "valid" events whose "improved", "best" and "stalled" agree with the metrics seen so far;
   one "start" (the resolved config) first and one "end" (totals) last.
2. --log-json FILE writes there instead, and --no-valid gives no "valid" events.
3. SIGINT, then the same command again: the log continues in the same file (a second "start"
   with resumed_from_step), events that the checkpoint did not keep (as a SIGKILL leaves them:
   simulated by appending a later step and a half-written line) are dropped, and steps increase
   over the whole file.
4. A diverging run (learning rate 1e30: the loss of step 2 overflows) ends its log with an
   "error" event carrying the command's message.

Usage: training_log.py ANUVAD CORPUS.tsv CONFIG.json
"""
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time

anuvad, corpus, config = sys.argv[1:4]
BASE = ["train", "--train-sets", corpus, "-c", config, "--batch-tokens", "60", "--seed", "1",
        "--src-vocab-size", "60", "--tgt-vocab-size", "80", "-q", "--disp-freq", "1",
        "--cpu-threads", "1"]
NUMBER = (int, float)


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def read_log(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    events = []
    for i, line in enumerate(lines, 1):
        try:
            event = json.loads(line)
        except json.JSONDecodeError as e:
            fail(f"{path}:{i}: not JSON ({e}): {line[:80]}")
        check(isinstance(event, dict) and isinstance(event.get("event"), str),
              f"{path}:{i}: not an object with an \"event\" string")
        events.append(event)
    return events


def check_fields(event, fields, where):
    for name, kind in fields.items():
        check(name in event, f"{where}: \"{event['event']}\" event without \"{name}\"")
        check(isinstance(event[name], kind) and not isinstance(event[name], bool) or kind is bool
              and isinstance(event[name], bool), f"{where}: \"{name}\" is {event[name]!r}")


def check_start(event, where):
    check_fields(event, {"time": str, "resumed_from_step": int, "config": dict, "parameters": int,
                         "threads": int, "train_examples": int, "valid_examples": int}, where)
    cfg = event["config"]
    check(cfg["model"]["d_model"] == 32 and cfg["model"]["tgt_vocab_size"] > 0, f"{where}: model config {cfg['model']}")
    check(cfg["training"]["seed"] == 1 and cfg["training"]["batch_tokens"] == 60, f"{where}: training config")
    check(cfg["preset"] == "tiny", f"{where}: preset")


def check_run(events, metrics, where, first_step=1):
    """Checks one run's events (start ... end); returns the train steps."""
    check(events[0]["event"] == "start" and events[-1]["event"] == "end", f"{where}: not start ... end")
    check_start(events[0], where)
    steps, elapsed, best, stalled = [], 0.0, {}, 0
    for e in events[1:-1]:
        kind = e["event"]
        if kind == "train":
            check_fields(e, {"step": int, "epoch": int, "loss": NUMBER, "learning_rate": NUMBER,
                             "tgt_tokens": int, "tgt_tokens_per_s": NUMBER, "elapsed_s": NUMBER}, where)
            check(e["loss"] > 0 and e["learning_rate"] > 0 and e["tgt_tokens_per_s"] > 0, f"{where}: {e}")
            check(e["elapsed_s"] >= elapsed, f"{where}: elapsed_s went back at step {e['step']}")
            elapsed = e["elapsed_s"]
            steps.append(e["step"])
        elif kind == "valid":
            check_fields(e, {"step": int, "elapsed_s": NUMBER, "metrics": dict, "improved": list,
                             "best": dict, "stalled": int, "early_stopping": int}, where)
            check(steps and e["step"] == steps[-1], f"{where}: validation at step {e['step']} after step {steps[-1:]}")
            check(set(metrics) | {"perplexity"} == set(e["metrics"]), f"{where}: metrics {sorted(e['metrics'])}")
            ce = e["metrics"]["cross-entropy"]
            check(abs(e["metrics"]["perplexity"] - math.exp(ce)) <= 1e-9 * math.exp(ce), f"{where}: perplexity")
            improved = [m for m in metrics if m not in best or
                        (e["metrics"][m] < best[m] if m == "cross-entropy" else e["metrics"][m] > best[m])]
            for m in improved:
                best[m] = e["metrics"][m]
            stalled = 0 if metrics[0] in improved else stalled + 1
            check(e["improved"] == improved, f"{where}: improved {e['improved']}, expected {improved}")
            check(e["best"] == best, f"{where}: best {e['best']}, expected {best}")
            check(e["stalled"] == stalled, f"{where}: stalled {e['stalled']}, expected {stalled}")
        else:
            fail(f"{where}: unexpected event {kind}")
    end = events[-1]
    check_fields(end, {"steps": int, "epochs": int, "elapsed_s": NUMBER, "tgt_tokens_per_s": NUMBER,
                       "last_train_loss": NUMBER, "epoch_losses": list, "best": dict,
                       "early_stopped": bool, "interrupted": bool, "model": str}, where)
    check(end["checkpoint"] is None if not end["interrupted"] else isinstance(end["checkpoint"], str),
          f"{where}: end checkpoint {end.get('checkpoint')!r}")
    check(steps == list(range(first_step, first_step + len(steps))), f"{where}: train steps {steps}")
    check(end["steps"] == steps[-1], f"{where}: end steps {end['steps']}, last train step {steps[-1]}")
    check(end["best"] == best, f"{where}: end best {end['best']}, expected {best}")
    return steps


def run(args, **kw):
    return subprocess.run([anuvad] + BASE + args, capture_output=True, text=True, **kw)


with tempfile.TemporaryDirectory() as d:
    # 1. Validation every 4 updates with two metrics, the log next to the model.
    metrics = ["cross-entropy", "chrf"]
    r = run(["--valid-sets", corpus, "--valid-freq", "4", "--valid-metrics"] + metrics +
            ["--after-epochs", "3", "-m", f"{d}/a.safetensors"])
    check(r.returncode == 0, "training failed: " + r.stderr)
    events = read_log(f"{d}/a.log.jsonl")
    steps = check_run(events, metrics, "a.log.jsonl")
    valid_steps = [e["step"] for e in events if e["event"] == "valid"]
    expected = [s for s in steps if s % 4 == 0] + ([steps[-1]] if steps[-1] % 4 else [])
    check(valid_steps == expected, f"validations at {valid_steps}, expected {expected}")
    check(events[-1]["epochs"] == 3 and len(events[-1]["epoch_losses"]) == 3, "end: epochs")
    check(events[-1]["model"] == f"{d}/a.safetensors" and not events[-1]["interrupted"], "end: model")
    print(f"a.log.jsonl: {len(events)} events, steps 1..{steps[-1]}, validations at {valid_steps}")

    # 2. --log-json FILE, no validation.
    r = run(["--no-valid", "--after-steps", "3", "--log-json", f"{d}/custom.jsonl", "-m", f"{d}/b.safetensors"])
    check(r.returncode == 0, "training failed: " + r.stderr)
    check(not os.path.exists(f"{d}/b.log.jsonl"), "--log-json: the default log was written too")
    events = read_log(f"{d}/custom.jsonl")
    check([e["event"] for e in events] == ["start", "train", "train", "train", "end"],
          f"--log-json --no-valid: events {[e['event'] for e in events]}")
    check_run(events, [], "custom.jsonl")
    print("--log-json FILE: start, 3 train events, end")

    # 3. SIGINT, a simulated SIGKILL leftover, then resume into the same log.
    log = f"{d}/c.log.jsonl"
    args = ["--no-valid", "--after-epochs", "100000", "-m", f"{d}/c.safetensors"]
    p = subprocess.Popen([anuvad] + BASE + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        if os.path.exists(log) and sum(1 for line in open(log) if '"train"' in line) >= 5:
            break
        time.sleep(0.01)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    check(p.returncode == 130, f"SIGINT: exit {p.returncode}: {err}")
    first = read_log(log)
    check(first[-1]["event"] == "end" and first[-1]["interrupted"], "SIGINT: no interrupted end event")
    check(first[-1]["checkpoint"] == f"{d}/c.checkpoint.safetensors", "SIGINT: end names the checkpoint")
    check(first[-1]["model"] == f"{d}/c.safetensors" and os.path.getsize(first[-1]["model"]) > 0,
          "SIGINT: end names the model written at -m")
    k = first[-1]["steps"]
    check_run(first, [], "c.log.jsonl before resume")
    with open(log, "a", encoding="utf-8") as f:  # what a SIGKILL after step k could leave behind
        f.write(json.dumps({"event": "train", "step": k + 2, "epoch": 1}) + '\n{"event": "tra')
    args[args.index("--after-epochs"):args.index("--after-epochs") + 2] = ["--after-steps", str(k + 4)]
    r = run(args)
    check(r.returncode == 0, "resume failed: " + r.stderr)
    events = read_log(log)
    check(events[:len(first)] == first, "resume: the first run's events changed")
    second = events[len(first):]
    check(second[0]["event"] == "start" and second[0]["resumed_from_step"] == k, f"resume: {second[0]}")
    check_run(second, [], "c.log.jsonl after resume", first_step=k + 1)
    train_steps = [e["step"] for e in events if e["event"] == "train"]
    check(train_steps == list(range(1, k + 5)), f"steps over the whole file: {train_steps}")
    print(f"SIGINT at step {k}, resumed to step {k + 4}: one log, steps 1..{k + 4}, leftovers dropped")

    # 4. Divergence: the error is the last event.
    r = run(["--no-valid", "--after-epochs", "50", "--learning-rate", "1e30", "--save-freq", "0",
             "-m", f"{d}/e.safetensors"])
    check(r.returncode == 1, f"diverging run: exit {r.returncode}")
    events = read_log(f"{d}/e.log.jsonl")
    check(events[0]["event"] == "start" and events[-1]["event"] == "error", "diverging run: not start ... error")
    check("step 2: training loss is NaN or Inf" in events[-1]["message"], f"error event: {events[-1]}")
    check(events[-1]["message"] in r.stderr, "error event: not the message the command printed")
    print("diverging run: the log ends with its error")
print("training log OK")
