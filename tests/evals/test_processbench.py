"""ProcessBench loader, metric and runner (real rows from the shared snapshot)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import pytest
from rewardkit.evals.processbench import (
    default_root,
    detection_stats,
    earliest_error,
    load_processbench,
    precision_recall,
    predict,
    processbench_metric,
    slices_to_steps,
    step_offsets,
    summarize,
    unit_labels,
)

from rewardkit.backends.base import ChatRequest, Completion, JudgeBackend, VerdictRequest, VerdictResult
from rewardkit.gar.slices import SliceScorer
from rewardkit.gar.slicing import whitespace_tokens
from rewardkit.types import Status

pytestmark = pytest.mark.skipif(not (default_root() / "gsm8k.jsonl").exists(), reason="ProcessBench data not found")

MARK = "ERRMARK"


class MarkJudge(JudgeBackend):
    """Test double: NO exactly for slices containing ERRMARK, YES otherwise; GARBLE -> unparseable."""

    model_id = "mark-judge"

    def __init__(self, garble: bool = False):
        self.calls: list[int] = []
        self.garble = garble

    @staticmethod
    def _slice(messages) -> str:
        return messages[-1]["content"].split("Reasoning to evaluate:", 1)[1].rsplit("Analyze this", 1)[0]

    def generate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        self.calls.append(len(requests))
        if self.garble:
            return [Completion(["hmm"]) for _ in requests]
        return [Completion(["**NO**" if MARK in self._slice(r.messages) else "**YES**"]) for r in requests]

    def verdict_probs(self, requests: Sequence[VerdictRequest]) -> list[VerdictResult]:
        raise AssertionError("not used")

    def count_tokens(self, texts):
        return whitespace_tokens(texts)


def _marked(rows):
    """Real rows with ERRMARK put at the start of the human-labelled earliest erroneous step."""
    out = []
    for r in rows:
        steps = list(r.steps)
        if r.label >= 0:
            steps[r.label] = f"{MARK} {steps[r.label]}"
        out.append(dataclasses.replace(r, steps=tuple(steps)))
    return out


def test_loader_counts_match_the_data_readme():
    rows = load_processbench("gsm8k")
    assert len(rows) == 400
    assert sum(r.label == -1 for r in rows) == 193  # README: rows with label == -1
    assert sum(r.final_answer_correct for r in rows) == 200  # README: exactly half
    assert rows[0].id == "gsm8k-0" and all(-1 <= r.label < len(r.steps) for r in rows)


def test_loader_subset_is_balanced_seeded_and_in_file_order():
    a = load_processbench("math", limit=10, seed=3)
    assert len(a) == 10 and sum(r.label == -1 for r in a) == 5
    assert [r.id for r in a] == [r.id for r in load_processbench("math", limit=10, seed=3)]
    assert [r.id for r in a] != [r.id for r in load_processbench("math", limit=10, seed=4)]
    order = [int(r.id.split("-")[1]) for r in a]
    assert order == sorted(order)
    with pytest.raises(ValueError, match="unknown ProcessBench split"):
        load_processbench("aime")


@pytest.mark.parametrize("limit", [0, -1])
def test_loader_refuses_a_limit_below_one(limit):
    """Before: limit 0 kept no row (a table of empty splits) and -1 failed as 'Sample larger than population or is
    negative', naming no option."""
    from rewardkit.runtime.jobs import JobError

    with pytest.raises(JobError, match=f"--limit must be a positive integer, got {limit}"):
        load_processbench("gsm8k", limit=limit)


def test_metric_hand_examples():
    m = processbench_metric([2, -1, 1, 3], [2, -1, 0, -1])
    assert (m["error_acc"], m["correct_acc"], m["f1"]) == (0.5, 0.5, 0.5)
    m = processbench_metric([0, 1, -1, 2], [0, 1, -1, -1])
    assert m["error_acc"] == 1.0 and m["correct_acc"] == 0.5 and m["f1"] == pytest.approx(2 / 3)
    assert processbench_metric([-1, -1], [3, -1])["f1"] == 0.0
    assert math.isnan(processbench_metric([-1], [-1])["f1"])  # no erroneous sample: F1 undefined


def test_earliest_error_never_reads_invalid_as_no():
    assert earliest_error(["YES", None, "NO", "NO"]) == 2
    assert earliest_error([None, None]) == -1 and earliest_error([]) == -1


def test_unit_labels_and_detection_counts():
    assert unit_labels([[0], [1], [2], [3]], 2) == [False, False, True, None]
    assert unit_labels([[0, 1], [1, 2], [3]], 2) == [False, True, None]
    assert unit_labels([[0], [1]], -1) == [False, False]
    c = detection_stats(["NO", "YES", "NO", None, "NO"], [True, True, False, True, None])
    assert c == {"tp": 1, "fp": 1, "fn": 1, "tn": 0, "invalid": 1}
    assert precision_recall(c) == {"precision": 0.5, "recall": 0.5}


def test_step_offsets_and_slice_mapping():
    steps = ["ab", "cde", "f"]
    joined = "\n\n".join(steps)
    offs = step_offsets(steps)
    assert [joined[a:b] for a, b in offs] == ["ab\n\n", "cde\n\n", "f"]
    assert slices_to_steps(steps, [(0, 3), (3, 5), (4, 11)]) == [[0], [0, 1], [1, 2]]


def test_oracle_judge_on_real_rows_scores_perfectly_in_steps_mode():
    rows = _marked(load_processbench("gsm8k", limit=20) + load_processbench("olympiadbench", limit=6))
    judge = MarkJudge()
    preds = predict(rows, SliceScorer(judge=judge), "steps")
    assert judge.calls == [sum(len(r.steps) for r in rows)]  # one backend call for every step of every row
    s = summarize(preds)
    for split in ("gsm8k", "olympiadbench"):
        assert s[split]["error_acc"] == 1.0 and s[split]["correct_acc"] == 1.0 and s[split]["f1"] == 1.0
        assert s[split]["precision"] == 1.0 and s[split]["recall"] == 1.0
    assert s["gsm8k"]["n_error"] == 10 and s["gsm8k"]["n_correct"] == 10


def test_reslice_mode_maps_slices_back_to_steps():
    rows = _marked(load_processbench("math", limit=16))
    # one word per slice: each slice lies in one step, so the oracle's first NO is the labelled step
    fine = predict(rows, SliceScorer(judge=MarkJudge(), slice_tokens=1, min_slice_tokens=0), "reslice")
    assert [p.prediction for p in fine] == [r.label for r in rows]
    # default L = 320: a slice may start in an earlier step, so the prediction is never after the label
    coarse = predict(rows, SliceScorer(judge=MarkJudge()), "reslice")
    assert all(p.prediction == -1 if r.label < 0 else 0 <= p.prediction <= r.label for p, r in zip(coarse, rows, strict=True))
    assert sum(len(p.verdicts) for p in coarse) < sum(len(p.verdicts) for p in fine)


def test_all_yes_and_garbled_judges():
    rows = load_processbench("gsm8k", limit=10)
    s = summarize(predict(rows, SliceScorer(judge=MarkJudge()), "steps"))["gsm8k"]  # no marks: always YES
    assert (s["error_acc"], s["correct_acc"], s["f1"]) == (0.0, 1.0, 0.0)
    g = summarize(predict(rows, SliceScorer(judge=MarkJudge(garble=True)), "steps"))["gsm8k"]
    assert g["correct_acc"] == 1.0 and g["error_acc"] == 0.0  # invalid is never a NO
    assert g["invalid_units"] == g["units"] > 0


@pytest.mark.model
def test_real_model_logit_mode_on_one_row(judge_backend):
    row = next(r for r in load_processbench("gsm8k", limit=10) if r.label == 1)
    row = dataclasses.replace(row, steps=row.steps[:2])  # two real steps keep the test to seconds
    preds = predict([row], SliceScorer(judge=judge_backend, mode="logit"), "steps")
    p = preds[0]
    assert len(p.verdicts) == len(row.steps) and all(s == Status.OK.value for s in p.statuses)
    assert all(0.0 <= q <= 1.0 for q in p.p_yes) and -1 <= p.prediction < len(row.steps)
    assert p.prediction == earliest_error(p.verdicts)
    s = summarize(preds)["gsm8k"]
    assert s["units"] == 2 and s["n_error"] == 1 and s["error_acc"] == float(p.prediction == 1)


def test_cli_command_writes_table_and_predictions(tmp_path, monkeypatch):
    import json

    import typer
    from rewardkit.cli.processbench import processbench
    from typer.testing import CliRunner

    import rewardkit.backends

    seen = {}

    def fake_load(spec, **kw):
        seen.update(spec=spec, **kw)
        return MarkJudge()

    monkeypatch.setattr(rewardkit.backends, "load_backend", fake_load)
    app = typer.Typer()
    app.command()(processbench)
    out = tmp_path / "pb"
    res = CliRunner().invoke(app, ["--split", "gsm8k", "--split", "math", "--limit", "4", "--mode", "generate",
                                   "--judge", "some/model", "--device", "cuda", "--batch-tokens", "2048",
                                   "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert seen == {"spec": "some/model?device=cuda&batch_tokens=2048"}  # the shared local-judge options
    assert "| gsm8k | 2/2 | 0.0 | 100.0 | 0.0 |" in res.output  # an all-YES judge: F1 = 0
    data = json.loads(out.with_suffix(".json").read_text())
    assert len(data["predictions"]) == 8 and data["config"]["splits"] == ["gsm8k", "math"]
    assert "| math |" in out.with_suffix(".md").read_text()
    bad = CliRunner().invoke(app, ["--split", "aime"])
    assert bad.exit_code != 0 and "unknown split" in bad.output


def test_cli_command_refuses_a_judge_that_cannot_answer_before_any_row(tmp_path):
    """Before: a server that was not there gave a table of invalid verdicts, read as 'no error found' ("acc.
    correct 100.0"), exit 0."""
    import socket

    import typer
    from rewardkit.cli.processbench import processbench
    from typer.testing import CliRunner

    app = typer.Typer()
    app.command()(processbench)
    with socket.socket() as s:  # bound, not listening: refuses connections while the test holds it
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
        res = CliRunner().invoke(app, ["--split", "gsm8k", "--limit", "2", "--judge", url, "--out", str(tmp_path / "pb")])
    assert res.exit_code == 2 and res.stdout == "", res.output
    assert res.stderr.startswith(f"error: judge {url}: GET {url}/models failed") and res.stderr.count("\n") == 1
    assert not (tmp_path / "pb.json").exists()
