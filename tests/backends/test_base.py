"""The backend contract (``JudgeBackend``): one result per request, in order, checked once for every backend."""

from __future__ import annotations

import pytest

from rewardkit import get_scorer
from rewardkit.testing import ScriptedJudge
from rewardkit.types import Group, Status


class Lossy(ScriptedJudge):
    """A user's backend with a bug: it drops the last result of every batch (of either call)."""

    def generate(self, requests):
        return super().generate(requests)[:-1]

    def verdict_probs(self, requests):
        return super().verdict_probs(requests)[:-1]


# every judge scorer whose judge answers a batch, in both verdict modes
JUDGE_SCORERS = [("tournament", {}), ("pointwise", {}), ("slices", {}), ("critic", {}), ("llm-judge", {}),
                 ("holistic", {})]


def _leaning_first(prompt: str, choices: tuple[str, ...]) -> list[float]:
    return [0.6] + [0.4 / (len(choices) - 1)] * (len(choices) - 1)


def _groups() -> list[Group]:
    return [Group("g", "What is 6 * 7?", ["So \\boxed{42}.", "Hence \\boxed{41}.", "It is \\boxed{40}."],
                  reference="42", expert="6 * 7 = 42, so \\boxed{42}.")]


@pytest.mark.parametrize("mode", ["generate", "logit"])
@pytest.mark.parametrize(("name", "options"), JUDGE_SCORERS)
def test_a_backend_that_loses_a_result_is_an_error_naming_it_at_every_judge_scorer(name, options, mode):
    """Before, the Arena and GAR each checked in their own words, and the critic and JURY-RL's LLM judge (which
    returned fewer verdicts than claims) failed further on in a bare ``zip()`` error."""
    judge = Lossy("\\boxed{A} Final judgment: True YES Answer: 1", _leaning_first)
    scorer = get_scorer(name, judge=judge, mode=mode, **options)
    call = "generate" if mode == "generate" else "verdict_probs"
    with pytest.raises(RuntimeError, match=rf"judge backend Lossy\.{call} returned \d+ results for \d+ requests"):
        scorer.score(_groups())


def test_a_backend_that_answers_every_request_is_untouched():
    judge = ScriptedJudge("YES", [0.7, 0.3])
    (s,) = get_scorer("slices", judge=judge, mode="logit").score(_groups())
    assert s.statuses == [Status.OK] * 3 and judge.verdict_batches == [3]


def test_a_backend_that_yields_its_results_is_read_as_a_list():
    class Yielding(ScriptedJudge):
        def generate(self, requests):
            yield from super().generate(requests)

    (s,) = get_scorer("slices", judge=Yielding("**YES**"), mode="generate").score(_groups())
    assert s.statuses == [Status.OK] * 3 and [sl["verdict"] for sl in s.extra["slices"][0]] == ["YES"]
