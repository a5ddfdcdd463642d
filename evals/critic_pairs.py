"""RARO critic data: expert answers against policy answers on the same problems, and held-out metrics.

The expert answer is MATH's reference solution (MATH-500 ``solution``, the shared rollouts' ``solution``);
policy answers are the shared Qwen2.5-Math rollouts and the embedded model's own samples on the same
problems. Each pair becomes one critic query in RARO's format (``rewardkit.raro.critic``): the two answers
in a seeded random order, the critic answering ``Answer 1``, ``Answer 2`` or ``tie`` (Sec. 3.3). The
held-out metrics are the share of pairs where the critic names the expert answer and the tie rate.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rewardkit.evals.splits import problem_key

from rewardkit.types import Group


@dataclass(frozen=True)
class CriticPair:
    """One (question, expert answer, policy answer) triple; ``source`` names the policy that wrote it."""

    id: str
    problem: str
    expert: str
    policy: str
    source: str
    policy_correct: bool | None = None

    def group(self) -> Group:
        """The pair as a one-response group (the shape ``CriticScorer`` scores; expert slot seeded by ``id``)."""
        return Group(self.id, self.problem, [self.policy], expert=self.expert,
                     labels=None if self.policy_correct is None else [self.policy_correct],
                     metadata={"source": self.source})


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def expert_solutions(*rows: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Normalised problem text -> reference solution, from rows with ``problem`` and ``solution`` (first wins)."""
    out: dict[str, str] = {}
    for rs in rows:
        for r in rs:
            if r.get("solution"):
                out.setdefault(problem_key(r["problem"]), r["solution"])
    return out


def policy_pairs(rows: Iterable[dict[str, Any]], experts: dict[str, str], source: str, per_problem: int | None = None,
                 seed: int = 0) -> list[CriticPair]:
    """Pairs from grouped rollout rows (``id``, ``problem``, ``responses``, optional ``correct``): each response
    against the problem's expert solution; ``per_problem`` keeps a seeded sample of the responses, incorrect
    ones first (so the few wrong Qwen answers are not sampled away). Problems without an expert are skipped."""
    out = []
    for r in rows:
        expert = experts.get(problem_key(r["problem"]))
        if not expert:
            continue
        correct = r.get("correct") or [None] * len(r["responses"])
        idx = list(range(len(r["responses"])))
        random.Random(f"{seed}:{r['id']}").shuffle(idx)
        idx.sort(key=lambda i: correct[i] is True)  # stable: wrong (and unknown) answers first
        for i in sorted(idx[:per_problem] if per_problem else idx):
            out.append(CriticPair(f"{r['id']}/{source}/{i}", r["problem"], expert, r["responses"][i], source,
                                  None if correct[i] is None else bool(correct[i])))
    return out


# --------------------------------------------------------------------------------- held-out metrics


def critic_report(pairs: Sequence[CriticPair], labels: Sequence[str | None],
                  expert_positions: Sequence[int] | None = None) -> dict[str, Any]:
    """Accuracy at naming the expert answer, tie rate and invalid rate over all pairs (an invalid verdict
    counts as not naming the expert), also per policy source and for wrong / right policy answers. With the expert slots, ``first_slot_rate``
    is the share of Answer 1/2 verdicts that picked Answer 1 (0.5 = no position bias when the expert sits
    first in half the pairs, ``expert_first_share``)."""
    if len(labels) != len(pairs):
        raise ValueError(f"{len(labels)} critic labels for {len(pairs)} pairs")
    bad = [x for x in labels if x not in ("expert", "policy", "tie", None)]
    if bad:
        raise ValueError(f"critic label must be expert, policy, tie or None, got {bad[0]!r}")

    def rates(ls: Sequence[str | None]) -> dict[str, Any]:
        n = len(ls)
        return {"n": n,
                "accuracy": sum(x == "expert" for x in ls) / n if n else math.nan,
                "tie_rate": sum(x == "tie" for x in ls) / n if n else math.nan,
                "policy_rate": sum(x == "policy" for x in ls) / n if n else math.nan,
                "invalid_rate": sum(x is None for x in ls) / n if n else math.nan}

    out = rates(labels)
    out["per_source"] = {s: rates([lab for p, lab in zip(pairs, labels, strict=True) if p.source == s])
                         for s in sorted({p.source for p in pairs})}
    # where the policy answer is wrong, naming the expert is right; where it is right too, a tie is fair
    out["policy_wrong"] = rates([lab for p, lab in zip(pairs, labels, strict=True) if p.policy_correct is False])
    out["policy_right"] = rates([lab for p, lab in zip(pairs, labels, strict=True) if p.policy_correct is True])
    if expert_positions is not None:
        if len(expert_positions) != len(pairs):
            raise ValueError(f"{len(expert_positions)} expert positions for {len(pairs)} pairs")
        first = [(lab == "expert") == (pos == 1) for lab, pos in zip(labels, expert_positions, strict=True)
                 if lab in ("expert", "policy")]
        out["first_slot_rate"] = float(np.mean(first)) if first else math.nan
        out["expert_first_share"] = float(np.mean([pos == 1 for pos in expert_positions])) if pairs else math.nan
    return out


def evaluate_critic(judge: Any, pairs: Sequence[CriticPair], **options: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run RARO's critic (``CriticScorer`` with ``options``) on every pair in one call and report the held-out
    metrics (``critic_report``); also returns one row per pair (label, expert slot, raw output or probs)."""
    from rewardkit.raro.critic import CriticScorer

    scores = CriticScorer(judge=judge, **options).score([p.group() for p in pairs])
    labels = [s.components["critic_label"][0] for s in scores]
    positions = [s.components["expert_position"][0] for s in scores]
    rows = []
    for p, s in zip(pairs, scores, strict=True):
        raw = (s.extra.get("critic_outputs") or s.extra.get("critic_probs") or [None])[0]
        rows.append({"id": p.id, "source": p.source, "policy_correct": p.policy_correct,
                     "label": s.components["critic_label"][0], "expert_position": s.components["expert_position"][0],
                     "status": s.statuses[0].value, "output": raw})
    return critic_report(pairs, labels, positions), rows


def _short(text: str, words: int = 12) -> str:
    w = " ".join(text.split()).split(" ")
    return " ".join(w) if len(w) <= words else " ".join(w[:words]) + " ..."


def verdict_target(answer_1: str, answer_2: str, verdict: str) -> str:
    """A critic reply in RARO's output format (reasoning, then the verdict alone on the last line, App. E)
    for a supervised warm start: the reasoning restates both answers and whether they agree."""
    if verdict not in ("Answer 1", "Answer 2", "tie"):
        raise ValueError(f"verdict must be 'Answer 1', 'Answer 2' or 'tie', got {verdict!r}")
    relation = "The two answers agree." if verdict == "tie" else "The two answers differ."
    return f"Answer 1 gives {_short(answer_1)}. Answer 2 gives {_short(answer_2)}. {relation}\n{verdict}"


def warm_start_rows(pairs: Sequence[CriticPair], seed: int = 0, view: str = "final",
                    template: str = "math") -> list[tuple[list[dict[str, str]], str]]:
    """(critic chat, target reply) rows from labelled pairs, expert slot seeded per pair id (as the scorer
    seeds it): the verdict is ``tie`` when the policy answer is right (both equally good), otherwise the
    expert's slot. Pairs without a correctness label are skipped."""
    from rewardkit.raro.critic import answer_view, critic_messages, expert_positions

    rows = []
    for p in pairs:
        if p.policy_correct is None:
            continue
        (pos,) = expert_positions(1, seed, p.id)
        e, q = answer_view(p.expert, view), answer_view(p.policy, view)
        a1, a2 = (e, q) if pos == 1 else (q, e)
        verdict = "tie" if p.policy_correct else f"Answer {pos}"
        rows.append((critic_messages(p.problem, a1, a2, template), verdict_target(a1, a2, verdict)))
    return rows
