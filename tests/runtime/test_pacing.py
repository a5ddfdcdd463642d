"""Progress counts groups as they finish: a slow scorer reports group by group, a fast one keeps whole batches
(before: one progress step per --batch-size batch, 10 minutes of silence at ~40 s per group)."""

from __future__ import annotations

import json
import time

import pytest
from rewardkit.cli.app import app
from typer.testing import CliRunner

from rewardkit.runtime.jobs import repair_jsonl, score_file
from rewardkit.runtime.pacing import paced_executor
from rewardkit.scoring import BaseScorer
from rewardkit.types import Group, GroupScore, Status


class Clocked:
    """A scorer that takes ``seconds`` per group on a fake clock (reward 1 for 'good')."""

    name = "clocked"

    def __init__(self, clock: list[float], seconds: float):
        self.clock, self.seconds, self.calls = clock, seconds, []

    def score(self, groups):
        self.calls.append(len(groups))
        self.clock[0] += self.seconds * len(groups)
        return [GroupScore(g.id, [float("good" in r) for r in g.responses], [Status.OK] * len(g)) for g in groups]


def groups(n: int) -> list[Group]:
    return [Group(f"g{i}", f"p {i}", ["good", "bad"]) for i in range(n)]


@pytest.mark.parametrize("seconds, sizes, interval", [
    (40.0, [1] * 16, 5.0),  # arena on a CPU: every group is reported as it finishes
    (2.0, [1, 2, 2, 2, 2, 2, 2, 2, 1], 5.0),  # 2 s per group, 5 s pace: two groups per line
    (0.001, [1, 15], 5.0),  # the verifier: timed on one group, then the rest of the batch in one call
    (0.0, [1, 15], 5.0),  # a scorer the clock cannot see: the rest of the batch, not a division by zero
    (2.0, [1, 5, 5, 5], 10.0),  # a 10 s pace: five groups per line
    (2.0, [1] * 16, 3.0),  # a 3 s pace and 2 s per group: still one at a time (never 0)
])
def test_sub_batches_fit_the_pace(seconds, sizes, interval):
    now = [0.0]
    scorer, told = Clocked(now, seconds), []
    run = paced_executor(scorer, told.append, interval=interval, clock=lambda: now[0])
    batch = groups(16)
    [(got, scores)] = list(run(iter([batch])))
    assert got is batch and [s.group_id for s in scores] == [g.id for g in batch]
    assert scorer.calls == sizes and told == sizes


def test_paced_scores_equal_whole_batch_scores(tmp_path):
    """The rows written are the same whether a batch is scored whole or in sub-batches."""
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"id": f"g{i}", "prompt": "p", "responses": ["good", "bad", "good"]}) + "\n"
                           for i in range(7)))
    now, told = [0.0], []
    slow = Clocked(now, 40.0)
    score_file(inp, slow, tmp_path / "paced.jsonl", batch_size=4,
               executor=paced_executor(slow, told.append, clock=lambda: now[0]))
    score_file(inp, Clocked([0.0], 40.0), tmp_path / "whole.jsonl", batch_size=4)
    strip = [{k: v for k, v in r.items() if k != "cost"} for r in repair_jsonl(tmp_path / "paced.jsonl")]
    assert strip == [{k: v for k, v in r.items() if k != "cost"} for r in repair_jsonl(tmp_path / "whole.jsonl")]
    assert told == [1] * 7


class Sleepy(BaseScorer):
    """A real scorer taking 20 ms per group (reward 1 for 'good')."""

    name = "sleepy"

    def _score(self, groups):
        time.sleep(0.02 * len(groups))
        return [GroupScore(g.id, [float("good" in r) for r in g.responses], [Status.OK] * len(g)) for g in groups]


@pytest.fixture
def sleepy(monkeypatch):
    """``sleepy`` registered; a 1 ms pace and no minimum gap between lines, so a 20 ms group is 'slow'."""
    import rewardkit.cli.common as common

    import rewardkit.runtime.pacing as pacing
    from rewardkit import scoring

    monkeypatch.setitem(scoring._REGISTRY, "sleepy", scoring.ScorerInfo("sleepy", f"{__name__}:Sleepy", "test"))
    monkeypatch.setattr(pacing, "PACE_SECONDS", 0.001)
    monkeypatch.setattr(common, "PROGRESS_INTERVAL", 0.0)


def shown(stderr: str, label: str) -> list[int]:
    return [int(x.split()[2].split("/")[0]) for x in stderr.splitlines() if x.startswith(label + ": ")]


def test_score_reports_each_group_of_a_batch_in_a_log(tmp_path, sleepy):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"id": f"g{i}", "prompt": "p", "responses": ["good", "bad"]}) + "\n"
                            for i in range(6)))
    res = CliRunner().invoke(app, ["score", str(rows), "-s", "sleepy", "--out", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 0, res.output
    assert shown(res.stderr, "score sleepy") == [1, 2, 3, 4, 5, 6], res.stderr  # before: [6], one batch of 16


def test_eval_reports_each_group_of_a_batch_in_a_log(tmp_path, sleepy):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"id": f"g{i}", "prompt": "p", "responses": ["good", "bad"],
                                        "correct": [True, False]}) + "\n" for i in range(5)))
    res = CliRunner().invoke(app, ["eval", "verifier", str(rows), "-s", "sleepy", "--out", str(tmp_path / "ev")])
    assert res.exit_code == 0, res.output
    assert shown(res.stderr, "score sleepy") == [1, 2, 3, 4, 5], res.stderr  # before: [5], one batch of 8
