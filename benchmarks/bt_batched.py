"""Batched Bradley-Terry fitter vs per-group scipy L-BFGS-B on live-tournament graphs (Reasoning Arena eq. 10).

10,000 groups of N = 8: each graph is the live tournament's (best / worst / median anchors, 18 matches)
with uniform random soft outcomes. Both fitters minimise the same mirrored, L2-regularised soft
cross-entropy; we report wall time of each in this process, alternated over ``--rounds`` rounds (scipy,
then batched, in each), the median of the per-round ratios with their spread (min-max), and max |dbeta|.

    PYTHONPATH=. python benchmarks/bt_batched.py [--groups 10000] [--n 8] [--l2 1.0] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from rewardkit.arena.ranking import newton_soft_pairwise_batched, opt_soft_pairwise
from rewardkit.arena.tournaments import LiveTournament, play

OUT = Path(__file__).parent / "results"


def live_graphs(groups: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Padded [G, M, 3] matches of live tournaments with random soft outcomes, and the [G, M] mask."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(groups):
        t = play(LiveTournament(n, order=rng.permutation(n)), lambda i, j: float(rng.random()))
        rows.append(np.asarray(t.matches, float))
    m = max(len(r) for r in rows)
    data = np.zeros((groups, m, 3))
    mask = np.zeros((groups, m), bool)
    for g, r in enumerate(rows):
        data[g, : len(r)] = r
        mask[g, : len(r)] = True
    return data, mask


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--l2", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=5, help="alternated rounds (scipy, then batched, in each)")
    args = ap.parse_args()

    data, mask = live_graphs(args.groups, args.n, args.seed)
    newton_soft_pairwise_batched(args.n, data[:10], mask[:10], l2=args.l2)  # warm-up

    rounds = []
    for _ in range(args.rounds):  # alternated: machine load moves both sides of a round alike
        t0 = time.perf_counter()
        per_group = np.stack([opt_soft_pairwise(args.n, d[m], l2=args.l2) for d, m in zip(data, mask, strict=True)])
        t_scipy = time.perf_counter() - t0
        t0 = time.perf_counter()
        batched = newton_soft_pairwise_batched(args.n, data, mask, l2=args.l2)
        t_batched = time.perf_counter() - t0
        rounds.append({"scipy_s": round(t_scipy, 4), "batched_s": round(t_batched, 4),
                       "ratio": round(t_scipy / t_batched, 2)})
    ratios = [r["ratio"] for r in rounds]
    t_scipy = statistics.median(r["scipy_s"] for r in rounds)
    t_batched = statistics.median(r["batched_s"] for r in rounds)

    res = {
        "groups": args.groups,
        "n_items": args.n,
        "matches_per_group": int(mask.sum(1).max()),
        "l2": args.l2,
        "seconds_scipy_lbfgsb": round(t_scipy, 4),
        "seconds_batched_newton": round(t_batched, 4),
        "speedup": round(statistics.median(ratios), 1),  # median of the per-round ratios
        "speedup_spread": [min(ratios), max(ratios)],
        "rounds": rounds,
        "max_abs_dbeta": float(np.abs(batched - per_group).max()),
        "machine": f"{platform.processor() or platform.machine()}, numpy {np.__version__}",
        "command": f"PYTHONPATH=. python benchmarks/bt_batched.py --rounds {args.rounds}",
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bt_batched.json").write_text(json.dumps(res, indent=2) + "\n")
    md = [
        "# Batched Bradley-Terry fitter vs per-group scipy L-BFGS-B",
        "",
        f"{args.groups} live-tournament graphs, N = {args.n}, {res['matches_per_group']} matches each, random soft"
        f" outcomes, mirrored, l2 = {args.l2}. Same process, same data, {args.rounds} rounds alternating the two"
        " fitters (scipy, then batched); medians, and the spread of the per-round ratios.",
        "",
        "| fitter | median seconds | speed-up (median of rounds) | spread | max abs dbeta |",
        "|---|---|---|---|---|",
        f"| scipy L-BFGS-B per group (`opt_soft_pairwise`) | {t_scipy:.3f} | 1x | | |",
        f"| vectorised Newton (`newton_soft_pairwise_batched`) | {t_batched:.3f} | {res['speedup']}x |"
        f" {min(ratios)}-{max(ratios)}x | {res['max_abs_dbeta']:.2e} |",
        "",
        "Rounds (scipy s / batched s = ratio): " + "; ".join(f"{r['scipy_s']} / {r['batched_s']} = {r['ratio']}x"
                                                            for r in rounds),
        "",
        f"Command: `{res['command']}`",
        "",
    ]
    (OUT / "bt_batched.md").write_text("\n".join(md))
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
