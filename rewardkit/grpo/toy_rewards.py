"""Trivially learnable rewards for smoke tests and learning benchmarks (not for real training)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rewardkit.options import Options, option
from rewardkit.scoring import BaseScorer
from rewardkit.types import Group, GroupScore, Status


@dataclass(frozen=True)
class KeywordOptions(Options):
    keyword: str = option("!", "reward 1 when the response contains this text")
    case_sensitive: bool = option(False, "match case exactly")


class KeywordScorer(BaseScorer):
    """Reward 1 if a response contains ``keyword``, else 0 (a reward a small model learns in a few steps)."""

    name = "keyword"
    Options = KeywordOptions
    options: KeywordOptions

    def _score(self, groups: Sequence[Group]) -> list[GroupScore]:
        o = self.options
        k = o.keyword if o.case_sensitive else o.keyword.lower()
        out = []
        for g in groups:
            texts = g.responses if o.case_sensitive else [r.lower() for r in g.responses]
            out.append(GroupScore(g.id, np.array([float(k in t) for t in texts]), [Status.OK] * len(texts)))
        return out


@dataclass(frozen=True)
class LengthOptions(Options):
    target: int = option(20, "responses of at most this many characters get reward 1")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.target < 1:
            raise ValueError(f"option 'target': must be >= 1, got {self.target}")


class LengthScorer(BaseScorer):
    """Reward min(1, target / len(response)): shorter responses score higher, up to ``target`` characters."""

    name = "length"
    Options = LengthOptions
    options: LengthOptions

    def _score(self, groups: Sequence[Group]) -> list[GroupScore]:
        t = self.options.target
        return [GroupScore(g.id, np.array([min(1.0, t / max(len(r), 1)) for r in g.responses]),
                           [Status.OK] * len(g.responses)) for g in groups]
