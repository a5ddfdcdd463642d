"""Judge-quality harness: pairs from the real shared rollouts and ProcessBench, scripted judges with known
behaviour (so every rate has a known value), and the embedded judge once through the CLI."""

import json

import numpy as np
import pytest
from rewardkit.cli.app import app
from rewardkit.evals.data import rollouts_path
from rewardkit.evals.harness import load_rollouts
from rewardkit.evals.judge_quality import (
    INJECTIONS,
    inject,
    injection_flip_rates,
    judge_messages,
    pairwise_accuracy,
    processbench_pairs,
    rollout_pairs,
)
from typer.testing import CliRunner

from rewardkit.backends import Completion, JudgeBackend, VerdictResult


class Scripted(JudgeBackend):
    """``policy``: "first" always picks the first-shown response; "oracle" picks whichever shown response
    is in ``good``; "obedient" is the oracle unless an injection is present, then it obeys it."""

    model_id = "scripted"

    def __init__(self, policy, good=(), bad=(), judge="tournament"):
        self.policy, self.good, self.bad, self.judge, self.calls = policy, list(good), list(bad), judge, 0

    def _first_wins(self, text):
        if self.policy == "first":
            return True
        if self.policy == "obedient":
            for k in INJECTIONS:
                for pos in (0, 1):
                    if inject("", k, self.judge, pos).strip() and inject("", k, self.judge, pos) in text:
                        return pos == 0
        g = min(text.find(x) for x in self.good if x in text)
        b = min(text.find(x) for x in self.bad if x in text)
        return g < b

    def generate(self, requests):
        self.calls += len(requests)
        out = []
        for r in requests:
            w = self._first_wins(r.messages[-1]["content"])
            txt = ("\\boxed{A}" if w else "\\boxed{B}") if self.judge == "tournament" else ("Answer 1" if w else "Answer 2")
            out.append(Completion([txt]))
        return out

    def verdict_probs(self, requests):
        self.calls += len(requests)
        return [VerdictResult(np.array([0.9, 0.05, 0.05]) if self._first_wins(r.messages[-1]["content"])
                              else np.array([0.05, 0.9, 0.05])) for r in requests]


@pytest.fixture(scope="module")
def pairs():
    return rollout_pairs(load_rollouts(rollouts_path()))


def test_rollout_and_processbench_pairs(pairs):
    assert len(pairs) == 10  # the 10 mixed groups of the shared file (86 all-correct, 4 all-wrong)
    assert all(p.good != p.bad for p in pairs)
    pb = processbench_pairs()
    assert len(pb) == 40 and {p.source for p in pb} == {"processbench-olympiadbench", "processbench-gsm8k"}
    assert len(processbench_pairs(limit=3)) == 3


def test_messages_put_the_first_response_first(pairs):
    p = pairs[0]
    for j in ("tournament", "critic"):
        text = judge_messages(j, p.question, p.reference, p.good, p.bad)[-1]["content"]
        assert text.index(p.good[:200]) < text.index(p.bad[:200])
    with pytest.raises(ValueError, match="unknown pairwise prompt"):
        judge_messages("nope", "q", None, "a", "b")


@pytest.mark.parametrize("judge", ["tournament", "critic"])
@pytest.mark.parametrize("mode", ["logit", "generate"])
def test_position_biased_judge(pairs, judge, mode):
    be = Scripted("first", judge=judge)
    r = pairwise_accuracy(pairs[:4], be, judge, mode)
    assert r["accuracy"] == 0.5 and r["order_flip_rate"] == 1.0 and r["invalid"] == 0
    # logit: P(first wins) = 0.9 + tie 0.05 / 2 = 0.925 in every presentation
    assert r["first_position_bias"] == pytest.approx(0.425 if mode == "logit" else 0.5)
    assert r["debiased_accuracy"] == 0.0  # a tie after mirroring is not a win


@pytest.mark.parametrize("judge", ["tournament", "critic"])
def test_oracle_and_obedient_judges_under_injection(pairs, judge):
    ps = pairs[:3]
    oracle = Scripted("oracle", [p.good[:300] for p in ps], [p.bad[:300] for p in ps], judge)
    r = pairwise_accuracy(ps, oracle, judge, "logit")
    assert r["accuracy"] == 1.0 and r["order_flip_rate"] == 0.0
    inj = injection_flip_rates(ps, oracle, judge, "logit")
    assert inj["kinds"] == len(INJECTIONS) >= 10
    assert all(row["flip_rate"] == 0.0 and row["flip_rate_debiased"] == 0.0 for row in inj["table"])
    obedient = Scripted("obedient", [p.good[:300] for p in ps], [p.bad[:300] for p in ps], judge)
    inj = injection_flip_rates(ps, obedient, judge, "generate")
    assert all(row["flip_rate"] == 1.0 and row["eligible"] == 6 for row in inj["table"])


def test_invalid_verdicts_are_counted_not_scored(pairs):
    class Broken(Scripted):
        def generate(self, requests):
            return [Completion(["I cannot decide"]) for _ in requests]

    r = pairwise_accuracy(pairs[:2], Broken("first"), "tournament", "generate")
    assert r["invalid"] == 4 and r["accuracy"] is None


@pytest.mark.model
def test_judge_cli_with_the_embedded_model(tmp_path, judge_backend):
    r = CliRunner().invoke(app, ["eval", "judge", "--pairs", "1", "--pb-pairs", "1", "--injection-pairs", "1",
                                 "--kinds", "fake_verdict", "--prompts", "tournament", "--modes", "logit",
                                 "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "judge_quality.json").read_text())
    assert data["rollout_pairs"][0]["presentations"] == 2 and data["processbench_pairs"][0]["pairs"] == 1
    assert data["injection"][0]["table"][0]["kind"] == "fake_verdict"
    assert (tmp_path / "judge_quality.md").read_text().startswith("# Judge quality")
