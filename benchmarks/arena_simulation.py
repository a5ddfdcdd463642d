"""Ranking quality vs judge calls for tournament schedules, with a simulated judge of known strengths.

Each trace has a latent log-strength beta ~ N(0, 1). The simulated judge sees the pair in a random
presentation order and prefers the response shown first with probability
sigma(kappa * (beta_first - beta_second) + bias) (``bias`` > 0 is a position bias towards "A"), and says
"Tie" with probability ``tie``; verdicts map to eq. 7 outcomes with gamma = 1. Every schedule is then
scored by Kendall tau between the Bradley-Terry fit (eq. 10, l2 = 1, mirrored) and the latent strengths.

Schedules: round robin (C(N,2) calls), live (best / worst / median anchors, 1 + 2 + 3(N-3) calls),
live with k random opponents (k = 1, 2, 3, 5), and our uncertainty schedule at several budgets.

    PYTHONPATH=. python benchmarks/arena_simulation.py [--seeds 200] [--kappa 2.0] [--bias 0.5] [--tie 0.1]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.special import expit
from scipy.stats import kendalltau

from rewardkit.ranking import (
    LiveTournament,
    RoundRobin,
    UncertaintyTournament,
    opt_soft_pairwise,
    play,
    random_opponents,
    win_rate_pairwise,
)

OUT = Path(__file__).parent / "results"


def simulated_judge(beta, rng, kappa, bias, tie, log):
    """A noisy, position-biased judge of known strengths; returns o_ij for i and logs first-shown outcomes."""

    def judge(i: int, j: int) -> float:
        i_first = rng.random() < 0.5
        a, b = (i, j) if i_first else (j, i)
        o_first = 0.5 if rng.random() < tie else float(rng.random() < expit(kappa * (beta[a] - beta[b]) + bias))
        log.append(o_first)
        return o_first if i_first else 1.0 - o_first

    return judge


def schedules(n: int, rng: np.random.Generator):
    yield "round robin", RoundRobin(n)
    yield "live (anchors)", LiveTournament(n, order=rng.permutation(n))
    for k in (1, 2, 3, 5):
        yield f"live random k={k}", LiveTournament(n, order=rng.permutation(n), select=random_opponents(k), rng=rng)
    for mult in (1.0, 1.5, 2.0, 3.0, 4.0):
        b = int(mult * n)
        if b < n * (n - 1) // 2:
            yield f"uncertainty B={b}", UncertaintyTournament(n, budget=b, rng=rng)


def family(name: str) -> str:
    return name.split(" k=")[0].split(" B=")[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--kappa", type=float, default=2.0)
    ap.add_argument("--bias", type=float, default=0.5)
    ap.add_argument("--tie", type=float, default=0.1)
    args = ap.parse_args()

    rows = []
    for n in (8, 16):
        acc: dict[str, dict[str, list[float]]] = {}
        for seed in range(args.seeds):
            rng = np.random.default_rng([n, seed])
            beta = rng.normal(size=n)
            for name, t in schedules(n, np.random.default_rng([n, seed, 1])):
                log: list[float] = []
                play(t, simulated_judge(beta, np.random.default_rng([n, seed, 2]), args.kappa, args.bias, args.tie, log))
                fit = opt_soft_pairwise(n, t.matches, l2=1.0)
                a = acc.setdefault(name, {"calls": [], "rounds": [], "tau": [], "bias": []})
                a["calls"].append(t.calls)
                a["rounds"].append(t.rounds)
                a["tau"].append(kendalltau(fit, beta)[0])
                a["bias"].append(np.mean(log) - 0.5)
                if name == "round robin":
                    w = acc.setdefault("round robin (win-rate eq. 8)", {"calls": [], "rounds": [], "tau": [], "bias": []})
                    w["calls"].append(t.calls)
                    w["rounds"].append(t.rounds)
                    w["tau"].append(kendalltau(win_rate_pairwise(n, t.matches), beta)[0])
                    w["bias"].append(np.mean(log) - 0.5)
        for name, a in acc.items():
            tau = np.asarray(a["tau"])
            rows.append({"n": n, "schedule": name, "family": family(name), "calls": float(np.mean(a["calls"])),
                         "rounds": float(np.mean(a["rounds"])), "kendall_tau": float(tau.mean()),
                         "tau_se": float(tau.std(ddof=1) / np.sqrt(len(tau))),
                         "measured_position_bias": float(np.mean(a["bias"]))})

    OUT.mkdir(parents=True, exist_ok=True)
    meta = {"seeds": args.seeds, "kappa": args.kappa, "bias_logit": args.bias, "tie": args.tie, "l2": 1.0,
            "command": "PYTHONPATH=. python benchmarks/arena_simulation.py"}
    (OUT / "arena_simulation.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    md = ["# Tournament schedules: Kendall tau vs judge calls (simulated judge)", "",
          f"Latent beta ~ N(0, 1); judge P(first wins) = sigma({args.kappa} * dbeta + {args.bias}), tie prob {args.tie},"
          f" random presentation order, BT fit l2 = 1 (mirrored). {args.seeds} seeds per N. +- is one standard error.",
          "", "| N | schedule | judge calls | rounds | Kendall tau | measured position bias |", "|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['n']} | {r['schedule']} | {r['calls']:.1f} | {r['rounds']:.1f} | {r['kendall_tau']:.3f} +- "
                  f"{r['tau_se']:.3f} | {r['measured_position_bias']:+.3f} |")
    md += ["", f"Command: `{meta['command']}`", ""]
    (OUT / "arena_simulation.md").write_text("\n".join(md))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    styles = {"round robin": ("k", "s"), "round robin (win-rate eq. 8)": ("gray", "D"), "live (anchors)": ("C0", "o"),
              "live random": ("C1", "^"), "uncertainty": ("C2", "v")}
    for ax, n in zip(axes, (8, 16), strict=True):
        for fam, (color, marker) in styles.items():
            pts = sorted((r["calls"], r["kendall_tau"], r["tau_se"]) for r in rows if r["n"] == n and r["family"] == fam)
            if pts:
                x, y, e = map(np.array, zip(*pts, strict=True))
                ax.errorbar(x, y, yerr=e, color=color, marker=marker, label=fam, capsize=2)
        ax.set_title(f"N = {n}")
        ax.set_xlabel("judge calls per group")
        ax.set_ylabel("Kendall tau (BT fit vs latent)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Simulated judge: kappa={args.kappa}, position bias={args.bias} logit, tie={args.tie}")
    fig.tight_layout()
    fig.savefig(OUT / "arena_simulation.png", dpi=120)
    print("\n".join(md))


if __name__ == "__main__":
    main()
