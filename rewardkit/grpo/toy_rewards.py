"""Trivially learnable rewards for smoke tests and learning benchmarks (not for real training)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rewardkit.scoring import BaseScorer
from rewardkit.types import Group, GroupScore, Status


@dataclass(frozen=True)
class KeywordOptions:
    keyword: str = field(default="!", metadata={"help": "reward 1 when the response contains this text"})
    case_sensitive: bool = field(default=False, metadata={"help": "match case exactly"})


class KeywordScorer(BaseScorer):
    """Reward 1 if a response contains ``keyword``, else 0 (a reward a small model learns in a few steps)."""

    name = "keyword"
    Options = KeywordOptions

    def __init__(self, keyword: str = "!", case_sensitive: bool = False):
        self.options = KeywordOptions(keyword, case_sensitive)

    def _score(self, groups: Sequence[Group]) -> list[GroupScore]:
        k = self.options.keyword if self.options.case_sensitive else self.options.keyword.lower()
        out = []
        for g in groups:
            texts = g.responses if self.options.case_sensitive else [r.lower() for r in g.responses]
            out.append(GroupScore(g.id, np.array([float(k in t) for t in texts]), [Status.OK] * len(texts)))
        return out


@dataclass(frozen=True)
class LengthOptions:
    target: int = field(default=20, metadata={"help": "responses of at most this many characters get reward 1"})


class LengthScorer(BaseScorer):
    """Reward min(1, target / len(response)): shorter responses score higher, up to ``target`` characters."""

    name = "length"
    Options = LengthOptions

    def __init__(self, target: int = 20):
        if target < 1:
            raise ValueError(f"option 'target': must be >= 1, got {target}")
        self.options = LengthOptions(target)

    def _score(self, groups: Sequence[Group]) -> list[GroupScore]:
        t = self.options.target
        return [GroupScore(g.id, np.array([min(1.0, t / max(len(r), 1)) for r in g.responses]),
                           [Status.OK] * len(g.responses)) for g in groups]
