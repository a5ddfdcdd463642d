"""What every trainer adapter shares: building a scorer from a name, and scoring rows as whole groups."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardkit.scoring import Scorer, get_scorer, register_scorer, scorer_names, scorer_options
from rewardkit.types import Group, GroupScore, Reference, reference_value


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
        if not takes_judge(spec):
            raise ValueError(f"scorer {spec!r} takes no judge")
        opts["judge"] = judge
    return get_scorer(spec, **opts)


def takes_judge(name: str) -> bool:
    """Whether the registered scorer ``name`` declares a ``judge`` option (a local judge's settings apply to it)."""
    return "judge" in {o.name for o in scorer_options(name)}


def group_rows(keys: Sequence[Hashable]) -> list[list[int]]:
    """Row indices grouped by key, groups in order of first appearance, rows in input order."""
    out: dict[Hashable, list[int]] = {}
    for i, k in enumerate(keys):
        out.setdefault(k, []).append(i)
    return list(out.values())


def score_rows(scorer: Scorer, prompts: Sequence[str], responses: Sequence[str], keys: Sequence[Hashable] | None = None,
               references: Sequence[Any] | None = None, experts: Sequence[str | None] | None = None,
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
        for col, what, value in ((prompts, "prompt", str), (references, "reference", reference_value),
                                 (experts, "expert", _str)):
            if col is not None and any(value(col[r]) != value(col[first]) for r in rows):
                raise ValueError(f"rows {rows} share a group key but differ in their {what}")
        groups.append(Group(f"g{gi}", prompts[first], [responses[r] for r in rows],
                            reference=None if references is None else references[first],
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
    """An open group: its rows (response, the waiting caller's future) and the timer that closes it short."""

    key: Hashable
    prompt: str
    reference: Reference | None
    expert: str | None
    rows: list[tuple[str, asyncio.Future]] = field(default_factory=list)
    timer: asyncio.TimerHandle | None = None


@dataclass
class _Job:
    groups: list[Group]
    done: asyncio.Future


class GroupGatherer:
    """Collects rows that arrive one by one (concurrent requests or tasks) into whole groups.

    ``await add(key, prompt, response, reference, expert)`` waits until ``group_size`` rows share ``key``,
    then returns ``(GroupScore, row index, partial)``. A group still short ``timeout`` seconds after its
    first row is scored as it stands (``partial`` True). A waiting row holds no thread and no lock: only
    its future. Closed groups queue for ONE scorer worker that scores everything queued in one call (in a
    worker thread), so a judge batches across groups; a failing call is retried group by group, so one
    bad group fails only its own rows. A cancelled caller's row leaves its still-open group.
    All calls must come from one event loop.
    """

    def __init__(self, scorer: Scorer, group_size: int, timeout: float = 60.0, max_batch: int = 1024):
        if group_size < 1:
            raise ValueError(f"option 'group_size': must be >= 1, got {group_size}")
        if not timeout > 0:
            raise ValueError(f"option 'group_timeout': must be > 0, got {timeout}")
        self.scorer, self.group_size, self.timeout, self.max_batch = scorer, group_size, timeout, max_batch
        self._open: dict[Hashable, _Pending] = {}
        self._queue: list[_Job] = []
        self._worker: asyncio.Task | None = None
        self._count = 0
        self.counts = {"rows": 0, "groups": 0, "partial_groups": 0, "scorer_calls": 0}

    @property
    def waiting(self) -> int:
        """Rows held for groups that are not full yet."""
        return sum(len(p.rows) for p in self._open.values())

    async def score(self, groups: list[Group]) -> list[GroupScore]:
        """Score whole groups through the shared scorer worker (batched with whatever else is queued)."""
        self.counts["rows"] += sum(len(g) for g in groups)
        self.counts["groups"] += len(groups)
        fut = asyncio.get_running_loop().create_future()
        self._submit(_Job(groups, fut))
        return await fut

    async def add(self, key: Hashable, prompt: str, response: str, reference: Reference | None = None,
                  expert: str | None = None) -> tuple[GroupScore, int, bool]:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        pend = self._open.get(key)
        if pend is not None:  # the group's rows share its problem: a row that differs is refused, not re-keyed
            for what, mine, its in (("prompt", prompt, pend.prompt),
                                    ("reference", reference_value(reference), pend.reference),
                                    ("expert", expert, pend.expert)):
                if mine != its:
                    raise ValueError(f"a row of group {key!r} differs in its {what} from the group's first row "
                                     f"({str(its)[:60]!r}; here: {str(mine)[:60]!r})")
        else:
            pend = self._open[key] = _Pending(key, prompt, reference_value(reference), expert)  # as Group keeps it
            pend.timer = loop.call_later(self.timeout, self._close, pend, True)
        row = (response, fut)
        pend.rows.append(row)
        self.counts["rows"] += 1
        if len(pend.rows) >= self.group_size:
            self._close(pend, False)
        try:
            return await fut
        except asyncio.CancelledError:
            if self._open.get(key) is pend and row in pend.rows:
                pend.rows.remove(row)
                if not pend.rows:
                    self._close(pend, True)
            raise

    def _close(self, pend: _Pending, partial: bool) -> None:
        if self._open.get(pend.key) is not pend:
            return
        del self._open[pend.key]
        if pend.timer is not None:
            pend.timer.cancel()
        rows = [r for r in pend.rows if not r[1].done()]
        if not rows:
            return
        self._count += 1
        self.counts["groups"] += 1
        self.counts["partial_groups"] += partial
        group = Group(f"g{self._count}", pend.prompt, [r for r, _ in rows], pend.reference, pend.expert)
        done = asyncio.get_running_loop().create_future()

        def answer(d: asyncio.Future) -> None:
            for i, (_, f) in enumerate(rows):
                if f.done():
                    continue
                if d.exception() is not None:
                    f.set_exception(d.exception())
                else:
                    f.set_result((d.result()[0], i, partial))

        done.add_done_callback(answer)
        self._submit(_Job([group], done))

    def _submit(self, job: _Job) -> None:
        self._queue.append(job)
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        while self._queue:
            jobs, n = [], 0
            while self._queue and (not jobs or n + len(self._queue[0].groups) <= self.max_batch):
                jobs.append(self._queue.pop(0))
                n += len(jobs[-1].groups)
            await self._run(jobs)

    async def _run(self, jobs: list[_Job]) -> None:
        groups = [g for j in jobs for g in j.groups]
        try:
            self.counts["scorer_calls"] += 1
            scores = await asyncio.to_thread(self.scorer.score, groups)
            if len(scores) != len(groups):
                raise RuntimeError(f"scorer returned {len(scores)} scores for {len(groups)} groups")
        except Exception as e:  # noqa: BLE001 - handed to the waiting rows
            if len(jobs) > 1:  # isolate the failing group: the others still get their rewards
                for j in jobs:
                    await self._run([j])
                return
            if not jobs[0].done.done():
                jobs[0].done.set_exception(e)
            return
        k = 0
        for j in jobs:
            if not j.done.done():
                j.done.set_result(scores[k:k + len(j.groups)])
            k += len(j.groups)
