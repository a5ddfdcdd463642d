"""What the trainer adapters share: a scorer from a name (load_scorer), flat rows scored as whole groups
(group_rows, score_rows), and GroupGatherer, the group assembly of the server-side adapters: batching, failures,
cancellation, timeouts."""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
from collections.abc import Awaitable
from dataclasses import dataclass

import numpy as np
import pytest

from rewardkit import scoring
from rewardkit.integrations.common import GroupGatherer, group_rows, load_scorer, score_rows, takes_judge
from rewardkit.options import Options, option
from rewardkit.scoring import BaseScorer
from rewardkit.types import Group, GroupScore, Status


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
        assert g.waiting == 0 and gone.cancelled()  # the caller sees its own cancellation, nothing else
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


# ----------------------------------------------------------------------------- a scorer that shows what it was given


@dataclass(frozen=True)
class EchoOptions(Options):
    judge: str = option("none", "a judge spec (only kept)")
    scale: float = option(1.0, "multiplies every reward")


class Echo(BaseScorer):
    """Reward = the response read as a number times ``scale`` ('nan': an error, no reward). Records every call's
    groups; with ``hold`` set, its first call waits for it (``entered`` says it is waiting)."""

    name = "echo"
    Options = EchoOptions

    def _setup(self):
        self.calls: list[list[Group]] = []
        self.hold: threading.Event | None = None
        self.entered = threading.Event()

    def _score(self, groups):
        if self.hold is not None and not self.calls:
            self.entered.set()
            self.hold.wait(30)
        self.calls.append(list(groups))
        if any("BOOM" in r for g in groups for r in g.responses):
            raise RuntimeError("scorer failed")
        out = []
        for g in groups:
            r = [float(x) * self.options.scale for x in g.responses]
            out.append(GroupScore(g.id, r, [Status.ERROR if math.isnan(v) else Status.OK for v in r]))
        return out

    def responses(self) -> list[list[list[str]]]:
        return [[list(g.responses) for g in call] for call in self.calls]


class Unjudged(BaseScorer):
    """A scorer with no options at all (no judge)."""

    name = "unjudged"

    def _score(self, groups):
        return [GroupScore(g.id, np.zeros(len(g)), [Status.OK] * len(g)) for g in groups]


ECHO, UNJUDGED = f"{__name__}:Echo", f"{__name__}:Unjudged"


@pytest.fixture
def registry(monkeypatch):
    """The scorer registry as it is, restored after the test (load_scorer registers import paths in it)."""
    monkeypatch.setattr(scoring, "_REGISTRY", dict(scoring._REGISTRY))


# ------------------------------------------------------------------------------------------------- load_scorer


def test_an_import_path_is_registered_under_its_own_name_and_built_with_its_cli_options_coerced(registry):
    assert ECHO not in scoring.scorer_names()
    opts = {"scale": "2.5"}
    sc = load_scorer(ECHO, opts)
    assert type(sc) is Echo and sc.options.scale == 2.5 and sc.options.judge == "none"
    assert ECHO in scoring.scorer_names() and ECHO in scoring.describe(ECHO)
    assert opts == {"scale": "2.5"}  # the caller's options are left as they were


def test_a_registered_name_with_a_colon_is_used_as_registered(registry):
    scoring.register_scorer("team:echo", ECHO, "our echo")
    assert type(load_scorer("team:echo")) is Echo
    assert scoring.describe("team:echo") == "our echo"  # not re-registered as an import path


def test_a_registered_name_is_built_and_an_unknown_plain_name_is_an_unknown_scorer(registry):
    before = scoring.scorer_names()
    assert type(load_scorer("majority-vote")).__name__ == "MajorityVoteScorer"
    with pytest.raises(KeyError, match="unknown scorer 'no-such-scorer'"):
        load_scorer("no-such-scorer")
    assert scoring.scorer_names() == before  # a plain name is never registered as an import path


def test_the_judge_fills_the_judge_option_of_a_scorer_that_has_one_and_is_refused_by_one_without(registry):
    opts = {"scale": "2"}
    sc = load_scorer(ECHO, opts, judge="http://judge:8000/v1")
    assert sc.options.judge == "http://judge:8000/v1" and sc.options.scale == 2.0
    assert opts == {"scale": "2"}
    assert takes_judge(ECHO)
    load_scorer(UNJUDGED)
    assert not takes_judge(UNJUDGED)
    with pytest.raises(ValueError, match="takes no judge"):
        load_scorer(UNJUDGED, judge="http://judge:8000/v1")
    assert takes_judge("llm-judge") and not takes_judge("verifier")  # the built-ins: a judge scorer, a checker


def test_a_scorer_instance_is_returned_as_is_and_options_or_a_judge_for_it_are_refused():
    sc = Echo()
    assert load_scorer(sc) is sc and load_scorer(sc, {}) is sc
    for kw in ({"options": {"scale": "2"}}, {"judge": "http://judge:8000/v1"},
               {"options": {"scale": "2"}, "judge": "http://judge:8000/v1"}):
        with pytest.raises(ValueError, match="not to a scorer instance"):
            load_scorer(sc, **kw)


# ------------------------------------------------------------------------------------------ group_rows, score_rows


def test_group_rows_groups_by_key_in_order_of_first_appearance():
    assert group_rows(["b", "a", "b", ("t", 1), "a", ("t", 1)]) == [[0, 2], [1, 4], [3, 5]]
    assert group_rows([]) == []


def test_rows_are_scored_as_whole_groups_in_one_call_and_answered_in_input_order():
    sc = Echo()
    prompts = ["P", "Q", "P", "Q", "R"]
    rewards, scores, idx = score_rows(sc, prompts, ["1", "2", "nan", "4", "5"], references=["r1", "r2", "r1", "r2", 7],
                                      experts=[None, 7, None, 7, "x"])
    assert rewards == [1.0, 2.0, None, 4.0, 5.0] and all(type(r) is float for r in rewards if r is not None)
    assert idx == [[0, 2], [1, 3], [4]]
    assert sc.responses() == [[["1", "nan"], ["2", "4"], ["5"]]]  # one call, every group whole
    seen = sc.calls[0]
    assert [g.prompt for g in seen] == ["P", "Q", "R"] and [g.reference for g in seen] == ["r1", "r2", "7"]
    assert [g.expert for g in seen] == [None, "7", "x"]  # the first row's expert, as text
    assert [g.id for g in seen] == ["g0", "g1", "g2"] and [s.group_id for s in scores] == ["g0", "g1", "g2"]
    assert scores[0].rewards[0] == 1.0 and math.isnan(scores[0].rewards[1])


def test_keys_group_rows_apart_from_their_prompt_text():
    sc = Echo()
    rewards, _, idx = score_rows(sc, ["P", "P", "P", "P"], ["1", "2", "3", "4"], keys=["u1", "u2", "u1", "u2"])
    assert idx == [[0, 2], [1, 3]] and rewards == [1.0, 2.0, 3.0, 4.0]
    assert sc.responses() == [[["1", "3"], ["2", "4"]]] and [g.reference for g in sc.calls[0]] == [None, None]


@pytest.mark.parametrize("kw, what", [({"prompts": ["P"]}, "1 prompts for 2 responses"),
                                      ({"references": ["r"]}, "1 references for 2 responses"),
                                      ({"experts": ["e", "e", "e"]}, "3 experts for 2 responses"),
                                      ({"keys": ["k"]}, "1 keys for 2 responses")])
def test_a_column_of_another_length_is_refused(kw, what):
    args = {"prompts": ["P", "P"], "responses": ["1", "2"], **kw}
    with pytest.raises(ValueError, match=what):
        score_rows(Echo(), **args)


@pytest.mark.parametrize("kw, what", [({"prompts": ["P", "Q"], "keys": ["k", "k"]}, "differ in their prompt"),
                                      ({"prompts": ["P", "P"], "references": ["1", "2"]}, "differ in their reference")])
def test_rows_sharing_a_key_must_share_their_prompt_and_reference(kw, what):
    sc = Echo()
    with pytest.raises(ValueError, match=what):
        score_rows(sc, responses=["1", "2"], **kw)
    assert sc.calls == []


class Careless:
    """Not a BaseScorer (no count check): returns the groups' scores with the last group or last reward cut."""

    name = "careless"

    def __init__(self, cut: str):
        self.cut = cut

    def score(self, groups):
        out = [GroupScore(g.id, np.ones(len(g)), [Status.OK] * len(g)) for g in groups]
        if self.cut == "group":
            return out[:-1]
        return [GroupScore(s.group_id, s.rewards[:-1], s.statuses[:-1]) for s in out]


@pytest.mark.parametrize("cut", ["group", "reward"])
def test_a_scorer_answering_fewer_groups_or_rewards_than_asked_is_an_error_not_missing_rewards(cut):
    with pytest.raises(ValueError):
        score_rows(Careless(cut), ["P", "Q", "P"], ["1", "2", "3"])


# ------------------------------------------------------------------------------------------------ GroupGatherer


@contextlib.asynccontextmanager
async def _scorer_busy(sc: Echo, first: Awaitable):
    """The scorer held inside its first call (``first``, started here) while the body queues more; let go on exit,
    whatever the body did, so that a failing test does not hang."""
    sc.hold = threading.Event()
    held = asyncio.ensure_future(first)
    try:
        assert await asyncio.to_thread(sc.entered.wait, 30)
        yield held
    finally:
        sc.hold.set()


def _run(coro, within: float = 30.0):
    """Run ``coro`` in a fresh loop, failing (not hanging) if it has not finished ``within`` seconds."""
    return asyncio.run(asyncio.wait_for(coro, within))


def test_a_full_group_is_scored_with_its_first_rows_prompt_reference_and_expert():
    sc = Echo()

    async def run():
        g = GroupGatherer(sc, group_size=2, timeout=30)
        head = asyncio.ensure_future(g.add("k", "P", "1", reference="R", expert="E"))
        await _until(lambda: g.waiting == 1)
        # a row of the open group with another prompt, reference or expert is refused (before, it was scored against
        # the first row's); the group stays open for a row that matches
        for kw, what in (({"prompt": "P2"}, "prompt 'P'; here: 'P2'"), ({"reference": "R2"}, "reference 'R'; here: 'R2'"),
                         ({"expert": None}, "expert 'E'; here: 'None'")):
            row = {"prompt": "P", "reference": "R", "expert": "E", **kw}
            with pytest.raises(ValueError) as e:
                await g.add("k", row["prompt"], "x", reference=row["reference"], expert=row["expert"])
            assert str(e.value) == f"a row of group 'k' differs in its {what.split(' ')[0]} from the group's first " \
                                   f"row ({what.split(' ', 1)[1]})"
        assert g.waiting == 1
        first = [await g.add("k", "P", "2", reference="R", expert="E"), await head]
        second = await asyncio.gather(g.add("k", "P", "3"), g.add("k", "P", "4"))  # a new group under the same key
        return first[::-1], second, dict(g.counts), g.waiting

    first, second, counts, waiting = _run(run())
    (s0, i0, p0), (s1, i1, p1) = first
    assert s0 is s1 and s0.rewards.tolist() == [1.0, 2.0] and (i0, p0, i1, p1) == (0, False, 1, False)
    seen = sc.calls[0][0]
    assert (seen.prompt, seen.reference, seen.expert) == ("P", "R", "E")
    assert [i for _, i, _ in second] == [0, 1] and second[0][0].rewards.tolist() == [3.0, 4.0]
    assert [c[0].id for c in sc.calls] == ["g1", "g2"]  # numbered in the order they closed
    assert counts == {"rows": 4, "groups": 2, "partial_groups": 0, "scorer_calls": 2} and waiting == 0


def test_rows_of_a_group_compare_their_references_as_the_group_keeps_them():
    # as Group keeps a reference (types.reference_value): 7 and "7", a list and a numpy array of the same answers are
    # one reference; a NaN (a missing value read by pandas, NaN != NaN) is refused saying why, not as rows that differ
    sc = Echo()
    with pytest.raises(ValueError, match="reference: expected a string or a finite number, got nan"):
        score_rows(sc, ["P", "P"], ["1", "2"], references=[float("nan"), float("nan")])
    _, _, idx = score_rows(sc, ["P"] * 4, ["1", "2", "3", "4"], references=[7, "7", 7.0, np.int64(7)],
                           experts=["E", "E", "E", "E"])
    assert idx == [[0, 1, 2, 3]] and sc.calls[-1][0].reference == "7"
    score_rows(sc, ["P", "P"], ["1", "2"], references=[np.array(["3", "4"]), ["3", "4"]], experts=[5, "5"])
    assert (sc.calls[-1][0].reference, sc.calls[-1][0].expert) == (("3", "4"), "5")
    with pytest.raises(ValueError, match=r"rows \[0, 1\] share a group key but differ in their reference"):
        score_rows(sc, ["P", "P"], ["1", "2"], references=[np.array(["3", "4"]), np.array(["3", "5"])])
    with pytest.raises(ValueError, match="differ in their expert"):
        score_rows(sc, ["P", "P"], ["1", "2"], experts=["E", "F"])

    async def run():  # the gatherer: the same rule
        g = GroupGatherer(sc, group_size=3, timeout=30)
        return await asyncio.gather(g.add("k", "P", "1", reference=4, expert="5"), g.add("k", "P", "2", reference="4"),
                                    g.add("k", "P", "3", reference=np.array(["4"]), expert="5"))

    with pytest.raises(ValueError, match=r"^a row of group 'k' differs in its expert from the group's first row "
                                         r"\('5'; here: 'None'\)$"):
        _run(run())
    sc.calls.clear()

    async def run_same():
        g = GroupGatherer(sc, group_size=3, timeout=30)
        return await asyncio.gather(g.add("k", "P", "1", reference=4, expert="5"),
                                    g.add("k", "P", "2", reference="4", expert="5"),
                                    g.add("k", "P", "3", reference=np.array(["4"]), expert="5"))

    assert [i for _, i, _ in _run(run_same())] == [0, 1, 2] and sc.calls[0][0].reference == "4"


def test_a_groups_timer_is_due_timeout_after_its_first_row_60_s_by_default_and_cancelled_when_it_fills():
    sc = Echo()

    async def run():
        g = GroupGatherer(sc, group_size=2)
        t0 = asyncio.get_running_loop().time()
        first = asyncio.ensure_future(g.add("k", "P", "1"))
        await _until(lambda: g.waiting == 1)
        timer = g._open["k"].timer
        await asyncio.gather(first, g.add("k", "P", "2"))
        return timer.when() - t0, timer.cancelled()

    due, cancelled = _run(run())
    assert 60.0 <= due < 61.0  # the first row came a moment after t0
    assert cancelled  # a full group holds no timer (nor, through it, its rows) for the rest of the minute


def test_a_group_of_one_is_scored_at_once_not_as_partial():
    sc = Echo()

    async def run():
        g = GroupGatherer(sc, group_size=1, timeout=0.5)
        return await g.add("k", "P", "3")

    s, i, partial = _run(run(), 20)  # far under the 30 s of a gatherer that wrongly waits for its timeout
    assert s.rewards.tolist() == [3.0] and i == 0 and partial is False


@pytest.mark.parametrize("kw", [{"group_size": 2, "timeout": -0.5}, {"group_size": -1}])
def test_negative_settings_are_refused(kw):
    with pytest.raises(ValueError, match="option"):
        GroupGatherer(Echo(), **kw)


def test_short_groups_are_each_closed_at_their_timeout_and_counted_as_partial():
    sc = Echo()

    async def run():
        g = GroupGatherer(sc, group_size=3, timeout=0.05)
        out = await asyncio.gather(g.add("a", "P", "1"), g.add("b", "Q", "2"), g.add("a", "P", "3"))
        return out, dict(g.counts)

    out, counts = _run(run())
    assert [(s.rewards.tolist(), i, p) for s, i, p in out] == [([1.0, 3.0], 0, True), ([2.0], 0, True),
                                                               ([1.0, 3.0], 1, True)]
    assert (counts["rows"], counts["groups"], counts["partial_groups"]) == (3, 2, 2)


def test_queued_jobs_are_batched_up_to_max_batch_groups_and_each_gets_its_own_scores():
    sc = Echo()

    async def run():
        g = GroupGatherer(sc, group_size=1, timeout=30, max_batch=4)
        async with _scorer_busy(sc, g.score([Group("x", "P", ["0"])])) as held:
            jobs = [asyncio.ensure_future(g.score(gs)) for gs in
                    ([Group("a", "P", ["1"])], [Group("b", "P", ["2"]), Group("c", "P", ["3", "33"])],
                     [Group("d", "P", ["4"])], [Group("e", "P", ["5"])])]
            await _until(lambda: g.counts["groups"] == 6)
        return await held, await asyncio.gather(*jobs), dict(g.counts)

    held, jobs, counts = _run(run())
    # 1 + 2 + 1 groups fill max_batch = 4; the fifth group waits for the next call
    assert sc.responses() == [[["0"]], [["1"], ["2"], ["3", "33"], ["4"]], [["5"]]]
    assert [[s.group_id for s in job] for job in [held, *jobs]] == [["x"], ["a"], ["b", "c"], ["d"], ["e"]]
    assert [[s.rewards.tolist() for s in job] for job in jobs] == [[[1.0]], [[2.0], [3.0, 33.0]], [[4.0]], [[5.0]]]
    assert counts == {"rows": 7, "groups": 6, "partial_groups": 0, "scorer_calls": 3}


def test_a_backlog_is_scored_1024_groups_per_call_by_default():
    sc = Echo()

    async def run():
        g = GroupGatherer(sc, group_size=1)
        async with _scorer_busy(sc, g.add("x", "P", "0")) as held:
            rows = [asyncio.ensure_future(g.add(i, "P", str(i))) for i in range(1025)]
            await _until(lambda: g.counts["groups"] == 1026)
        await held
        return [s.rewards[0] for s, _, _ in await asyncio.gather(*rows)]

    rewards = _run(run())
    assert [len(c) for c in sc.calls] == [1, 1024, 1] and rewards == list(range(1025))


def test_a_failure_in_a_batch_of_two_fails_only_its_own_job():
    sc = Echo()

    async def run():
        g = GroupGatherer(sc, group_size=1, timeout=30)
        async with _scorer_busy(sc, g.score([Group("x", "P", ["0"])])) as held:
            ok = asyncio.ensure_future(g.score([Group("a", "P", ["1"])]))
            bad = asyncio.ensure_future(g.score([Group("b", "P", ["BOOM"])]))
            await _until(lambda: g.counts["groups"] == 3)
        await held
        return await ok, await asyncio.gather(bad, return_exceptions=True)

    ok, (err,) = _run(run())
    assert ok[0].rewards.tolist() == [1.0] and isinstance(err, RuntimeError)
    assert sc.responses()[1:] == [[["1"], ["BOOM"]], [["1"]], [["BOOM"]]]


def test_a_scorer_answering_the_wrong_number_of_groups_fails_the_rows_it_was_asked_for():
    async def run():
        g = GroupGatherer(Careless("group"), group_size=2, timeout=30)
        return await asyncio.gather(g.add("k", "P", "1"), g.add("k", "P", "2"), return_exceptions=True)

    errs = _run(run())
    assert all(isinstance(e, RuntimeError) and "0 scores for 1 groups" in str(e) for e in errs)


def test_cancelled_callers_get_no_answer_and_the_worker_goes_on():
    sc = Echo()

    async def run():
        g = GroupGatherer(sc, group_size=1, timeout=30)
        async with _scorer_busy(sc, g.score([Group("x", "P", ["0"])])) as held:
            gone_bad = asyncio.ensure_future(g.score([Group("a", "P", ["BOOM"])]))
            kept = asyncio.ensure_future(g.score([Group("b", "P", ["2"])]))
            await _until(lambda: g.counts["groups"] == 3)
            held.cancel()  # its call is under way: its scores arrive with no one to take them
            gone_bad.cancel()  # queued: scored (and failing) with no one to tell
        after = await g.score([Group("c", "P", ["3"])])
        return await kept, after, held.cancelled() and gone_bad.cancelled()

    kept, after, cancelled = _run(run())
    assert kept[0].rewards.tolist() == [2.0] and after[0].rewards.tolist() == [3.0] and cancelled


def test_a_row_cancelled_after_its_group_closed_is_scored_but_not_answered_and_the_others_are():
    sc = Echo()

    async def run():
        g = GroupGatherer(sc, group_size=3, timeout=30)
        async with _scorer_busy(sc, g.score([Group("x", "P", ["0"])])) as held:
            rows = [asyncio.ensure_future(g.add("k", "P", r)) for r in ("1", "2", "3")]
            await _until(lambda: g.counts["groups"] == 2)
            rows[1].cancel()
        await held
        return await rows[0], await rows[2]

    (s0, i0, p0), (s2, i2, p2) = _run(run())
    assert sc.responses()[1] == [["1", "2", "3"]] and s0.rewards.tolist() == [1.0, 2.0, 3.0]
    assert (i0, p0, i2, p2) == (0, False, 2, False)


def test_a_row_cancelled_as_its_group_fills_is_left_out_of_it():
    sc = Echo()

    async def run():
        g = GroupGatherer(sc, group_size=3, timeout=30)
        a, b = (asyncio.ensure_future(g.add("k", "P", r)) for r in ("1", "2"))
        await _until(lambda: g.waiting == 2)
        c = asyncio.ensure_future(g.add("k", "P", "3"))  # runs before a's cancellation is handled
        a.cancel()
        out = await asyncio.gather(b, c)
        return out, a.cancelled()

    ((sb, ib, pb), (sc_, ic, pc)), cancelled = _run(run())
    assert sc.responses() == [[["2", "3"]]] and sb.rewards.tolist() == [2.0, 3.0]
    assert (ib, pb, ic, pc) == (0, False, 1, False) and cancelled


def test_a_cancelled_row_leaves_an_open_group_that_others_still_fill():
    sc = Echo()

    async def run():
        g = GroupGatherer(sc, group_size=3, timeout=30)
        a, b = (asyncio.ensure_future(g.add("k", "P", r)) for r in ("1", "2"))
        await _until(lambda: g.waiting == 2)
        a.cancel()
        await asyncio.gather(a, return_exceptions=True)
        waiting = g.waiting
        rest = await asyncio.gather(b, g.add("k", "P", "3"), g.add("k", "P", "4"))
        return waiting, rest, dict(g.counts)

    waiting, rest, counts = _run(run())
    assert waiting == 1 and sc.responses() == [[["2", "3", "4"]]]
    assert [(i, p) for _, i, p in rest] == [(0, False), (1, False), (2, False)] and counts["partial_groups"] == 0
