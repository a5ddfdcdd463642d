"""What every trainer adapter shares: building a scorer from a name, and scoring rows as whole groups."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

from rewardkit.scoring import _REGISTRY, Scorer, get_scorer, register_scorer
from rewardkit.types import Group, GroupScore


def load_scorer(spec: str | Scorer, options: dict[str, Any] | None = None, judge: str | None = None) -> Scorer:
    """A Scorer from a registered name, a ``"module:Class"`` import path, or an instance (returned as is).

    ``options`` may hold CLI strings (coerced to the declared types); ``judge`` fills the ``judge`` option.
    """
    if not isinstance(spec, str):
        if options or judge:
            raise ValueError("options and judge apply to a scorer name, not to a scorer instance")
        return spec
    opts = dict(options or {})
    if judge is not None:
        opts["judge"] = judge
    if ":" in spec and spec not in _REGISTRY:
        register_scorer(spec, spec, f"custom scorer {spec}")
    return get_scorer(spec, **opts)


def group_rows(keys: Sequence[Hashable]) -> list[list[int]]:
    """Row indices grouped by key, groups in order of first appearance, rows in input order."""
    out: dict[Hashable, list[int]] = {}
    for i, k in enumerate(keys):
        out.setdefault(k, []).append(i)
    return list(out.values())


def score_rows(scorer: Scorer, prompts: Sequence[str], responses: Sequence[str], keys: Sequence[Hashable] | None = None,
               references: Sequence[str | None] | None = None, experts: Sequence[str | None] | None = None,
               ) -> tuple[list[float | None], list[GroupScore], list[list[int]]]:
    """Score flat rows (one response each) as whole groups in ONE scorer call.

    Rows sharing a key (default: the prompt text) form a group; returns the per-row rewards in input
    order (None for a masked response), the GroupScores and the row indices of each group.
    """
    n = len(responses)
    if len(prompts) != n:
        raise ValueError(f"{len(prompts)} prompts for {n} responses")
    for name, col in (("references", references), ("experts", experts), ("keys", keys)):
        if col is not None and len(col) != n:
            raise ValueError(f"{len(col)} {name} for {n} responses")
    idx = group_rows(list(keys) if keys is not None else list(prompts))
    groups = []
    for gi, rows in enumerate(idx):
        first = rows[0]
        for col, what in ((prompts, "prompt"), (references, "reference")):
            if col is not None and any(col[r] != col[first] for r in rows):
                raise ValueError(f"rows {rows} share a group key but differ in their {what}")
        groups.append(Group(f"g{gi}", prompts[first], [responses[r] for r in rows],
                            reference=None if references is None else _str(references[first]),
                            expert=None if experts is None else _str(experts[first])))
    scores = scorer.score(groups)
    out: list[float | None] = [None] * n
    for rows, s in zip(idx, scores, strict=True):
        for r, v in zip(rows, s.rewards, strict=True):
            out[r] = None if math.isnan(v) else float(v)
    return out, scores, idx


def _str(x: Any) -> str | None:
    return None if x is None else str(x)
