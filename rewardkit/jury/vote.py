"""JURY-RL's proposal: a plurality vote over answer labels (Sec. 4.1), equivalent answers counted as one."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from rewardkit.answers import AnswerChecker, cluster_answers, default_checker


@dataclass(frozen=True)
class Vote:
    """The result of a majority vote over answer labels (``None`` = no answer, never a candidate)."""

    labels: tuple[Hashable | None, ...]
    candidates: tuple[Hashable, ...]  # distinct labels, most votes first; ties by first appearance
    counts: tuple[int, ...]  # votes of each candidate, same order

    @property
    def majority(self) -> Hashable | None:
        """The proposal a-hat (None when no response has an answer)."""
        return self.candidates[0] if self.candidates else None

    @property
    def share(self) -> float:
        """alpha = |M| / G (eq. 5): the majority share over all G responses."""
        return self.counts[0] / len(self.labels) if self.candidates else 0.0

    def top(self, k: int) -> tuple[Hashable, ...]:
        """The k most-voted candidates (for top-k verification, App. G.3)."""
        return self.candidates[:k]

    def mask(self, label: Hashable | None) -> np.ndarray:
        """Which responses carry ``label`` (all False for None)."""
        return np.array([lab is not None and lab == label for lab in self.labels], dtype=bool)


def vote(labels: Sequence[Hashable | None]) -> Vote:
    """Plurality vote a-hat = argmax_a sum_i 1[a_i = a] (Sec. 4.1) with a fixed tie-break: among answers
    with the most votes, the one that appears first wins (App. A.2 edge case (i)).

    >>> v = vote(["11", "11", "4", None, "4", "7"])
    >>> v.majority, v.counts, v.share  # 11 and 4 tie at 2 votes: 11 came first; None never counts
    ('11', (2, 2, 1), 0.3333333333333333)
    """
    counts: dict[Hashable, int] = {}
    first: dict[Hashable, int] = {}
    for i, lab in enumerate(labels):
        if lab is None:
            continue
        counts[lab] = counts.get(lab, 0) + 1
        first.setdefault(lab, i)
    order = sorted(counts, key=lambda a: (-counts[a], first[a]))
    return Vote(tuple(labels), tuple(order), tuple(counts[a] for a in order))


def majority_vote(
    answers: Sequence[str | None], *, checker: AnswerChecker | None = None
) -> tuple[Vote, list[str | None]]:
    """Vote over extracted final answers with equivalent answers counted as one vote (math-verify).

    Returns the vote over cluster ids and, per cluster id, its representative answer (first member)."""
    ids = cluster_answers(list(answers), checker or default_checker())
    reps: dict[int, str] = {}
    for a, i in zip(answers, ids, strict=True):
        if i is not None and a is not None:
            reps.setdefault(i, a)
    return vote(ids), [reps.get(i) if i is not None else None for i in range(max(reps, default=-1) + 1)]
