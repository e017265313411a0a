#!/usr/bin/env python3
"""batched.py's near-tie check on hand-made beam traces (docs/attention.md "The beam trace").

On real models the check meets a changed hypothesis rarely (none on data/ here; CI's sanitizer
build once), so its decisions are pinned here: a swap of two candidates' order between the runs
explains a parting, the same order with other selections does not, nor do log-probabilities
apart by more than the tolerance, searches of different lengths, or a final ranking changed
without a swap of the finished scores.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from batched import explain  # noqa: E402

TOL = 0.01


def candidate(token, status, score, logprob=None):
    return {"token": token, "status": status, "score": score,
            "logprob": score if logprob is None else logprob}


def trace(step0, later_steps=(), finished=(), n_best=(3,)):
    """A search from BOS (id 0): step 0's candidates, then steps of (parent, token, candidates)."""
    steps = [[{"id": 0, "parent": None, "token": 2, "candidates": step0}]]
    for hypotheses in later_steps:
        steps.append([{"id": i, "parent": p, "token": t, "candidates": c} for i, p, t, c in hypotheses])
    return {"steps": steps, "finished": [{"id": i, "normalized": s} for i, s in finished], "n_best": list(n_best)}


def check(name, got, want_none, want_text=""):
    ok = got is None if want_none else (got is not None and want_text in got)
    print(f"{'ok' if ok else 'FAILED'}: {name}: {got}")
    return ok


def main():
    alone = trace([candidate(5, "kept", -1.000), candidate(6, "pruned", -1.002)])
    results = [
        check("a swap of two candidates' order explains the parting",
              explain(alone, trace([candidate(5, "pruned", -1.003), candidate(6, "kept", -1.001)]), TOL), True),
        check("equal within the trace's digits counts as a swap",
              explain(alone, trace([candidate(5, "pruned", -1.000), candidate(6, "kept", -1.000004)]), TOL), True),
        check("other selections in the same order are not a tie",
              explain(alone, trace([candidate(5, "pruned", -1.000), candidate(6, "kept", -1.002)]), TOL), False,
              "in the same order in both"),
        check("an EOS finishing in one run only swaps with any candidate of the step",
              explain(trace([candidate(3, "finished", -2.000), candidate(7, "kept", -2.001)]),
                      trace([candidate(3, "pruned", -2.002), candidate(7, "kept", -2.001)]), TOL), True),
        check("a selected candidate's log-probability off by more than the tolerance fails",
              explain(alone, trace([candidate(5, "kept", -1.000, -1.5), candidate(6, "pruned", -1.002)]), TOL),
              False, "log-probability"),
        check("searches of different lengths fail",
              explain(alone, trace([candidate(5, "kept", -1.000), candidate(6, "pruned", -1.002)],
                                   [[(1, 0, 5, [candidate(3, "finished", -1.1)])]]), TOL),
              False, "stopped at different steps"),
        check("another final choice with the finished scores swapped is a tie",
              explain(trace([candidate(5, "kept", -1.0)], finished=[(3, -0.500), (4, -0.501)], n_best=[3]),
                      trace([candidate(5, "kept", -1.0)], finished=[(3, -0.502), (4, -0.501)], n_best=[4]), TOL),
              True),
        check("another final choice in the same order fails",
              explain(trace([candidate(5, "kept", -1.0)], finished=[(3, -0.500), (4, -0.501)], n_best=[3]),
                      trace([candidate(5, "kept", -1.0)], finished=[(3, -0.500), (4, -0.501)], n_best=[4]), TOL),
              False, "ranked differently"),
    ]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
