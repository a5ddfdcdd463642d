"""JURY-RL proof gate on the shared Qwen2.5-Math rollouts (100 MATH problems x 8 samples, labelled).

The reference-answer verifier (math-verify against the dataset answer) stands in for Lean. Measures:
- how often the gate opens (majority verified) and how often ResZero fires (gate closed);
- the zero-mean property of ResZero on every group (exact rational sums and float sums);
- the gate's precision/recall of "the majority answer is correct" against the upstream labels;
- per fallback (Table 3) and for plain majority vote: how rewards agree with the labels, and the share of
  responses with a non-zero GRPO advantage; wall time relative to majority vote in the same process.

Run: PYTHONPATH=. python benchmarks/proof_gate_rollouts.py [--data PATH]
Writes benchmarks/results/proof_gate_rollouts.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from _common import rel_path  # noqa: E402  (benchmarks/ is on sys.path when run as a script)
from rewardkit.evals.data import rollouts_path  # noqa: E402

from rewardkit.jury.proof_gate import MajorityVoteScorer, ProofGateScorer
from rewardkit.jury.reszero import reszero_exact
from rewardkit.scoring import diversity_stats, grpo_advantages
from rewardkit.types import Group

DEFAULT = rollouts_path()
OUT = Path(__file__).parent / "results"


def load(path: Path) -> list[Group]:
    rows = [json.loads(line) for line in path.open()]
    return [Group(r["id"], r["problem"], r["responses"], reference=r["answer"], labels=r["correct"]) for r in rows]


def agreement(groups: list[Group], scores) -> dict[str, float]:
    """Responses with a positive reward vs the labels; GRPO non-zero advantage share."""
    pos = np.concatenate([s.rewards > 0 for s in scores])
    lab = np.concatenate([np.array(g.labels, bool) for g in groups])
    tp = int((pos & lab).sum())
    adv = np.concatenate([grpo_advantages(s.rewards) for s in scores])
    return {
        "mean_reward": float(np.mean(np.concatenate([s.rewards for s in scores]))),
        "positive_precision": tp / max(int(pos.sum()), 1),
        "positive_recall": tp / max(int(lab.sum()), 1),
        "wrong_rewarded_positive": int((pos & ~lab).sum()),
        "nonzero_advantage_share": float(np.mean(np.abs(adv) > 1e-9)),
        "non_diverse_groups": diversity_stats(scores).non_diverse,
    }


def gate_confusion(groups: list[Group], scores, votes) -> tuple[int, int, int, int]:
    """Gate outcome vs "the majority answer is labelled correct" (label of its first response)."""
    tp = fp = fn = tn = 0
    for g, s, (v, _) in zip(groups, scores, votes, strict=True):
        idx = int(np.argmax(v.mask(v.majority))) if v.majority is not None else None
        truth = bool(g.labels[idx]) if idx is not None else False
        opened = s.stats["gate"] == "verified"
        tp += opened and truth
        fp += opened and not truth
        fn += (not opened) and truth
        tn += (not opened) and not truth
    return tp, fp, fn, tn


def judge_gate(groups: list[Group], votes, judge: str, n: int) -> dict:
    """The label-free gate (the App. D LLM judge verifies the majority answer) vs the reference oracle on a
    subset: every group whose labels are not all correct, then all-correct ones up to ``n`` groups."""
    idx = [i for i, g in enumerate(groups) if not all(g.labels)]
    idx += [i for i, g in enumerate(groups) if all(g.labels)][: max(n - len(idx), 0)]
    sub, sub_votes = [groups[i] for i in idx], [votes[i] for i in idx]
    out = {"judge": judge, "mode": "logit", "groups": len(sub)}
    for name, opts in (("reference", {"verifier": "reference"}),
                       ("llm-judge", {"verifier": "llm-judge", "judge": judge, "mode": "logit"})):
        t0 = time.perf_counter()
        scores = ProofGateScorer(**opts).score(sub)
        tp, fp, fn, tn = gate_confusion(sub, scores, sub_votes)
        p, r = tp / max(tp + fp, 1), tp / max(tp + fn, 1)
        out[name] = {"tp": tp, "fp": fp, "fn": fn, "tn": tn, "precision": p, "recall": r,
                     "reszero_fired_fraction": sum(s.stats["gate"] != "verified" for s in scores) / len(sub),
                     "verifier": scores[0].stats["verifier"], "seconds": time.perf_counter() - t0,
                     "judge_calls": sum(s.cost.judge_calls for s in scores)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=DEFAULT)
    ap.add_argument("--c", type=float, default=0.01)
    ap.add_argument("--judge", default="smollm2", help="judge for the label-free LLM-judge gate")
    ap.add_argument("--judge-groups", type=int, default=24, help="groups in the label-free comparison")
    args = ap.parse_args()
    groups = load(args.data)

    # warm-up: fills the shared math-verify cache (clusters and reference checks) for every timed run below
    MajorityVoteScorer().score(groups)
    cold = ProofGateScorer(verifier="reference").score(groups)
    t0 = time.perf_counter()
    mv = MajorityVoteScorer().score(groups)
    t_mv = time.perf_counter() - t0
    runs, times = {}, {}
    for fb in ("reszero", "zero", "random", "mv"):
        t0 = time.perf_counter()
        runs[fb] = ProofGateScorer(verifier="reference", fallback=fb, c=args.c, seed=0).score(groups)
        times[fb] = time.perf_counter() - t0

    jury = runs["reszero"]
    gates = [s.stats["gate"] for s in jury]
    fired = [s for s in jury if s.stats["gate"] != "verified"]
    # exact zero mean: ResZero of every group's equivalence-cluster labels, in rational arithmetic
    from rewardkit.jury.proof_gate import default_checker, vote_groups

    votes = vote_groups(groups, default_checker())
    exact_sums = [sum(reszero_exact(v.labels, c=args.c)) for v, _ in votes]
    float_sums = [abs(float(s.rewards.sum())) for s in fired]

    tp, fp, fn, tn = gate_confusion(groups, jury, votes)
    prec = tp / max(tp + fp, 1)
    rec = tp / max(tp + fn, 1)
    label_free = judge_gate(groups, votes, args.judge, args.judge_groups)

    res = {
        "data": rel_path(args.data), "groups": len(groups), "responses": sum(len(g) for g in groups), "c": args.c,
        "gate": {k: gates.count(k) for k in ("verified", "refuted", "inconclusive")},
        "reszero_fired_fraction": len(fired) / len(groups),
        "zero_mean": {"exact_sum_zero_groups": sum(x == 0 for x in exact_sums), "groups": len(exact_sums),
                      "max_abs_float_sum_fired": max(float_sums, default=0.0)},
        "gate_vs_labels": {"tp": tp, "fp": fp, "fn": fn, "tn": tn, "precision": prec, "recall": rec,
                           "f1": 2 * prec * rec / max(prec + rec, 1e-12)},
        "label_free": label_free,
        "verifier_calls": sum(s.cost.verifier_calls for s in cold), "cache_hits": sum(s.cost.cache_hits for s in cold),
        "scorers": {"majority-vote": {**agreement(groups, mv), "seconds": t_mv, "time_vs_mv": 1.0}}
        | {f"proof-gate+{fb}": {**agreement(groups, runs[fb]), "seconds": times[fb], "time_vs_mv": times[fb] / t_mv}
           for fb in runs},
        "fired_groups": [{"id": s.group_id, "gate": s.stats["gate"], "majority": s.stats["majority_answer"],
                          "share": s.stats["majority_share"], "rewards": [round(float(r), 5) for r in s.rewards]}
                         for s in fired],
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "proof_gate_rollouts.json").write_text(json.dumps(res, indent=1))
    lines = [
        "# Proof gate on the shared Qwen2.5-Math rollouts: a label-free judge gate, and the reference oracle",
        "",
        f"Data: `{rel_path(args.data)}` ({res['groups']} groups x 8 responses); c = {args.c}.",
        "Command: `PYTHONPATH=. python benchmarks/proof_gate_rollouts.py`",
        "",
        "In the 100-group part the verifier is math-verify against the dataset answer, so the gate's precision/recall measure",
        "agreement between two graders (math-verify and the upstream Qwen2.5-Math grader), not Lean. Times are",
        "measured after a warm-up pass that fills the shared answer-equivalence cache (so they compare the",
        "scorers' own work: voting, one verification per group, the fallback).",
        "",
        f"- Gate outcomes: {res['gate']}; ResZero fires in **{res['reszero_fired_fraction']:.0%}** of groups.",
        f"- Zero mean: ResZero sums to exactly 0 (rational arithmetic) in {res['zero_mean']['exact_sum_zero_groups']}"
        f"/{res['zero_mean']['groups']} groups; max |float sum| over fired groups = {res['zero_mean']['max_abs_float_sum_fired']:.1e}.",
        f"- Gate vs labels (positive = majority answer labelled correct): precision {prec:.3f}, recall {rec:.3f}"
        f" (tp {tp}, fp {fp}, fn {fn}, tn {tn}).",
        f"- Verifier calls (cold run): {res['verifier_calls']} checks run + {res['cache_hits']} served from the answer cache"
        f" (answers already compared while clustering) for {len(groups)} groups: one verification per group.",
        "",
        "## Label-free gate (what JURY-RL trains with) vs the reference oracle",
        "",
        f"The App. D LLM judge (`{label_free['judge']}`, verdict-logit) verifies the majority answer, on {label_free['groups']}"
        " groups: every group whose labels are not all correct, then all-correct ones. Lean (the paper's gate) cannot",
        "run here (no Lean toolchain with its core library installs on these machines); with a real judge or Lean pass",
        "`--judge` / use `-o verifier=lean`.",
        "",
        "| verifier | gate precision | gate recall | tp / fp / fn / tn | ResZero fires | judge calls | seconds |",
        "|---|---|---|---|---|---|---|",
        *[f"| {k} | {v['precision']:.3f} | {v['recall']:.3f} | {v['tp']} / {v['fp']} / {v['fn']} / {v['tn']} | "
          f"{v['reszero_fired_fraction']:.0%} | {v['judge_calls']} | {v['seconds']:.1f} |"
          for k, v in ((k, label_free[k]) for k in ("reference", "llm-judge"))],
        "",
        "## All 100 groups with the reference verifier (an oracle: it reads the dataset answer)",
        "",
        "| scorer | mean reward | P(correct given r>0) | rewarded share of correct | wrong responses with r>0 | non-zero GRPO advantage | non-diverse groups | time vs MV |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, a in res["scorers"].items():
        lines.append(f"| {name} | {a['mean_reward']:.4f} | {a['positive_precision']:.3f} | {a['positive_recall']:.3f} | "
                     f"{a['wrong_rewarded_positive']} | {a['nonzero_advantage_share']:.3f} | {a['non_diverse_groups']} | "
                     f"{a['time_vs_mv']:.2f}x |")
    lines += ["", "Groups where the gate stayed closed:", "", "| id | gate | majority | share | ResZero rewards |", "|---|---|---|---|---|"]
    for f in res["fired_groups"]:
        lines.append(f"| {f['id']} | {f['gate']} | `{f['majority']}` | {f['share']:.3f} | {f['rewards']} |")
    (OUT / "proof_gate_rollouts.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
