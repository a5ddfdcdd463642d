"""What every trainer adapter shares: building a scorer from a name, and scoring rows as whole groups."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardkit.scoring import Scorer, get_scorer, register_scorer, scorer_names, scorer_options
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
    if ":" in spec and spec not in scorer_names():
        register_scorer(spec, spec, f"custom scorer {spec}")
    if judge is not None:
        if "judge" not in {o.name for o in scorer_options(spec)}:
            raise ValueError(f"scorer {spec!r} takes no judge")
        opts["judge"] = judge
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


@dataclass
class _Pending:
    group: Group
    futures: list[asyncio.Future] = field(default_factory=list)


class GroupGatherer:
    """Collects rows that arrive one by one (concurrent requests or tasks) into whole groups.

    ``await add(key, prompt, response, reference, expert)`` waits until ``group_size`` rows share ``key``,
    scores that group in ONE ``scorer`` call (in a worker thread; one call at a time) and returns
    ``(GroupScore, row index, partial)``. A group still short after ``timeout`` seconds is scored as it
    stands (``partial`` True). A scorer failure reaches every waiting row; none gets a reward.
    """

    def __init__(self, scorer: Scorer, group_size: int, timeout: float = 60.0):
        if group_size < 1:
            raise ValueError(f"option 'group_size': must be >= 1, got {group_size}")
        if not timeout > 0:
            raise ValueError(f"option 'group_timeout': must be > 0, got {timeout}")
        self.scorer, self.group_size, self.timeout = scorer, group_size, timeout
        self._open: dict[Hashable, _Pending] = {}
        self._lock = asyncio.Lock()
        self._score_lock = asyncio.Lock()
        self._count = 0

    async def score(self, groups: list[Group]) -> list[GroupScore]:
        async with self._score_lock:
            return await asyncio.to_thread(self.scorer.score, groups)

    async def add(self, key: Hashable, prompt: str, response: str, reference: str | None = None,
                  expert: str | None = None) -> tuple[GroupScore, int, bool]:
        fut = asyncio.get_running_loop().create_future()
        async with self._lock:
            pend = self._open.get(key)
            if pend is None:
                self._count += 1
                pend = self._open[key] = _Pending(Group(f"g{self._count}", prompt, [], reference, expert))
            index = len(pend.group.responses)
            pend.group.responses.append(response)
            pend.futures.append(fut)
            full = len(pend.futures) >= self.group_size
            if full:
                del self._open[key]
        if full:
            await self._finish(pend, partial=False)
        try:
            s, partial = await asyncio.wait_for(asyncio.shield(fut), self.timeout)
        except asyncio.TimeoutError:
            async with self._lock:
                mine = self._open.get(key) is pend
                if mine:
                    del self._open[key]
            if mine:
                await self._finish(pend, partial=True)
            s, partial = await fut
        return s, index, partial

    async def _finish(self, pend: _Pending, partial: bool) -> None:
        try:
            (s,) = await self.score([pend.group])
        except Exception as e:  # noqa: BLE001 - handed to every waiter
            for f in pend.futures:
                if not f.done():
                    f.set_exception(e)
            return
        for f in pend.futures:
            if not f.done():
                f.set_result((s, partial))
