"""Verifier speed and label agreement on the 800 shared rollouts.

Baseline: math-verify called once per response, in process, no cache (the extracted answer vs the gold,
the same pairs the scorer checks). Ours: ``VerifierScorer`` (dedupe, exact-string fast path, verdict
cache, 2 deadline-bounded worker processes), started cold in the same process. Verdicts must be identical.

    python benchmarks/verifier_speed.py [--rounds 5]

The two sides alternate in each round; the speed-up is the median of the per-round ratios, with their spread.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, rollouts_path, write_results  # noqa: E402

from rewardkit.answers import AnswerChecker, extract_answer, math_verify_equivalent  # noqa: E402
from rewardkit.runtime.inputs import read_groups  # noqa: E402
from rewardkit.verifier import VerifierScorer  # noqa: E402


def clear_math_verify_caches() -> None:
    """math-verify memoises its last 20 LaTeX parses; start every timed run from empty caches."""
    from math_verify import parser

    for name in ("parse_latex_cached", "parse_expr_cached", "extract_latex"):
        fn = getattr(parser, name, None)
        if hasattr(fn, "cache_clear"):
            fn.cache_clear()


def baseline(groups) -> list[bool]:
    return [math_verify_equivalent(g.reference, p) if (p := extract_answer(r)) is not None else False
            for g in groups for r in g.responses]


def ours(groups) -> tuple[list[bool], int, int]:
    checker = AnswerChecker()  # cold: new workers, empty cache
    sc = VerifierScorer(checker=checker)
    scores = sc.score(groups)
    out = [bool(x) for s in scores for x in s.rewards]
    calls, hits = checker.calls, checker.hits
    checker.close()
    return out, calls, hits


def main(repeats: int = 5) -> None:
    groups = list(read_groups(rollouts_path()))
    labels = [x for g in groups for x in g.labels]
    tb, to = [], []
    for _ in range(repeats):
        clear_math_verify_caches()
        t = time.perf_counter()
        vb = baseline(groups)
        tb.append(time.perf_counter() - t)
        clear_math_verify_caches()
        t = time.perf_counter()
        vo, calls, hits = ours(groups)
        to.append(time.perf_counter() - t)
    mb, mo = statistics.median(tb), statistics.median(to)
    ratios = sorted(b / o for b, o in zip(tb, to, strict=True))
    speedup = statistics.median(ratios)
    agree = sum(a == b for a, b in zip(vo, labels)) / len(labels)
    data = {
        "responses": len(labels), "repeats": repeats,
        "baseline_seconds": mb, "rewardkit_seconds": mo, "speedup": speedup,
        "speedup_spread": [round(ratios[0], 2), round(ratios[-1], 2)], "rounds_seconds": {"baseline": tb, "rewardkit": to},
        "identical_verdicts": vb == vo, "math_verify_runs_ours": calls, "cache_hits_ours": hits,
        "label_agreement": agree, "disagreements": sum(a != b for a, b in zip(vo, labels)),
        "machine": machine(),
    }
    md = f"""# Verifier: speed and label agreement (800 shared rollouts)

Command: `python benchmarks/verifier_speed.py --rounds {repeats}` ({repeats} rounds alternating the two sides, medians;
both start from empty caches: a fresh checker for ours, math-verify's own LaTeX-parse memo cleared for both).

| | seconds | verdicts |
|---|---:|---|
| math-verify once per response, no cache | {mb:.2f} | baseline |
| rewardkit `verifier` scorer | {mo:.2f} | identical: {vb == vo} |

Speed-up: **{speedup:.1f}x**, the median of the rounds' ratios (spread {ratios[0]:.1f}-{ratios[-1]:.1f}x; target >= 5x). math-verify runs needed by ours: {calls} of {len(labels)}.

Agreement with the upstream `correct` labels: **{agree:.2%}** ({data['disagreements']} disagreement; listed with
its reason in `tests/fixtures/verifier_disagreements.json`: the label is the upstream grader's slip).
"""
    write_results("verifier_speed", data, md)
    print(json.dumps(data, indent=2))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5, help="alternated rounds (math-verify, then rewardkit, in each)")
    main(ap.parse_args().rounds)
