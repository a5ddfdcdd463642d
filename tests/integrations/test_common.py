"""GroupGatherer, the group assembly every server-side adapter shares: batching, failures, cancellation."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from rewardkit.integrations.common import GroupGatherer
from rewardkit.scoring import BaseScorer
from rewardkit.types import GroupScore, Status


class Gate(BaseScorer):
    """Reward = position in the group; waits for ``gate`` on its first call; a response 'BOOM' raises."""

    name = "gate"

    def __init__(self):
        self.calls: list[list[list[str]]] = []
        self.gate = threading.Event()
        self.entered = threading.Event()  # set when the first call is held at the gate

    def _score(self, groups):
        if not self.calls:
            self.entered.set()
            self.gate.wait(30)
        self.calls.append([list(g.responses) for g in groups])
        if any("BOOM" in r for g in groups for r in g.responses):
            raise RuntimeError("scorer failed")
        return [GroupScore(g.id, np.arange(len(g), dtype=float), [Status.OK] * len(g)) for g in groups]


async def _until(cond, within: float = 30.0) -> None:
    """Yield to the loop until ``cond()`` holds: explicit synchronisation instead of a fixed sleep."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not cond():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.001)


def test_groups_closed_while_the_scorer_is_busy_are_scored_in_one_call_and_a_failure_stays_in_its_group():
    sc = Gate()

    async def run():
        g = GroupGatherer(sc, group_size=2, timeout=30)
        first = [asyncio.ensure_future(g.add("a", "p", r)) for r in ("a1", "a2")]
        assert await asyncio.to_thread(sc.entered.wait, 30)  # group a is being scored (held at the gate)
        rest = [asyncio.ensure_future(g.add(k, "p", f"{k}{i}")) for k in ("b", "c") for i in (1, 2)]
        bad = [asyncio.ensure_future(g.add("d", "p", r)) for r in ("BOOM", "d2")]
        await _until(lambda: g.counts["groups"] == 4)  # b, c and d closed and queued behind a
        sc.gate.set()
        done = await asyncio.gather(*first, *rest)
        errs = await asyncio.gather(*bad, return_exceptions=True)
        return done, errs, g.counts

    done, errs, counts = asyncio.run(run())
    assert sc.calls[0] == [["a1", "a2"]]
    assert sc.calls[1] == [["b1", "b2"], ["c1", "c2"], ["BOOM", "d2"]]  # b, c and d closed meanwhile: one call
    assert sc.calls[2:] == [[["b1", "b2"]], [["c1", "c2"]], [["BOOM", "d2"]]]  # it failed: retried group by group
    assert [(i, p) for _, i, p in done] == [(0, False), (1, False)] * 3
    assert all(isinstance(e, RuntimeError) for e in errs)
    assert counts["groups"] == 4 and counts["partial_groups"] == 0


def test_a_cancelled_row_leaves_its_open_group():
    sc = Gate()
    sc.gate.set()

    async def run():
        g = GroupGatherer(sc, group_size=2, timeout=30)
        gone = asyncio.ensure_future(g.add("k", "p", "client-went-away"))
        await _until(lambda: g.waiting == 1)
        gone.cancel()
        await asyncio.gather(gone, return_exceptions=True)  # its cancellation has run
        assert g.waiting == 0
        return await asyncio.gather(g.add("k", "p", "x"), g.add("k", "p", "y"))

    out = asyncio.run(run())
    assert sc.calls == [[["x", "y"]]] and [i for _, i, _ in out] == [0, 1]


def test_a_short_group_is_scored_after_the_timeout_from_its_first_row():
    sc = Gate()
    sc.gate.set()

    async def run():
        g = GroupGatherer(sc, group_size=3, timeout=0.2)
        return await g.add("k", "p", "only"), g.counts

    (s, i, partial), counts = asyncio.run(run())
    assert partial and len(s.rewards) == 1 and counts["partial_groups"] == 1


@pytest.mark.parametrize("kw", [{"group_size": 0}, {"group_size": 2, "timeout": 0}])
def test_bad_settings_are_refused(kw):
    with pytest.raises(ValueError, match="option"):
        GroupGatherer(Gate(), **kw)
