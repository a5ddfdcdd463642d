"""The answer verifier: the RLVR baseline scorer (reward 1 when the final answer matches the reference)."""

from __future__ import annotations

import numpy as np

from rewardkit.answers import AnswerChecker, default_checker, extract_answer
from rewardkit.scoring import BaseScorer
from rewardkit.types import Cost, Group, GroupScore, Status


class VerifierScorer(BaseScorer):
    """Binary exact-answer reward R_v: extract each final answer, check it against the group's reference.

    A response with no final answer gets reward 0 (it is wrong, not unknown); a check that times out or
    crashes gets that status and no reward; a group without a reference answer abstains.

    Options:
        timeout: seconds allowed per (gold, prediction) check before it counts as a timeout
        workers: answer-check worker processes
    """

    name = "verifier"

    def __init__(self, timeout: float = 5.0, workers: int = 2, checker: AnswerChecker | None = None):
        if checker is None:
            checker = default_checker() if (timeout, workers) == (5.0, 2) else AnswerChecker(timeout, workers)
        self.checker = checker

    def _score(self, groups: list[Group]) -> list[GroupScore]:
        preds = [[extract_answer(r) for r in g.responses] for g in groups]
        pairs = [(g.reference, p) for g, ps in zip(groups, preds) if g.reference is not None for p in ps]
        checks = iter(self.checker.check_many(pairs))
        out = []
        for g, ps in zip(groups, preds):
            if g.reference is None:
                out.append(GroupScore.failed(g.id, len(g), Status.ABSTAIN, "group has no reference answer",
                                             extra={"preds": ps}))
                continue
            cs = [next(checks) for _ in ps]
            rewards = np.array([np.nan if c.equivalent is None else float(c.equivalent) for c in cs])
            out.append(GroupScore(
                g.id, rewards, [c.status for c in cs],
                components={"verifier": rewards.copy()},
                cost=Cost(verifier_calls=len(cs), cache_hits=sum(c.cached for c in cs)),
                messages=[c.message if c.status is not Status.OK else None for c in cs],
                extra={"preds": ps},
            ))
        return out
