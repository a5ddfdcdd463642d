"""GAR's holistic critic baseline (Table 4 row 3): one discriminator call per whole trace."""

from __future__ import annotations

import numpy as np
import pytest

from rewardkit.gar.holistic import HolisticScorer
from rewardkit.gar.slices import DiscriminatorScorer, SliceScorer
from rewardkit.scoring import get_scorer, scorer_options
from rewardkit.testing import ScriptedJudge
from rewardkit.types import Group, Status

# four paragraphs that the slicer cuts apart; the error sits in the middle one only
TRACE = ("Let x be the number of apples. We know 6 bags hold 7 apples each.\n\n"
         "So the total is 6 + 7 = 13. ERR\n\n"
         "Wait, that adds instead of multiplying: 6 * 7 = 42.\n\n"
         "Therefore the answer is \\boxed{42}.")
CLEAN = TRACE.replace(" ERR", "")


def _slice_text(prompt: str) -> str:
    return prompt.split("Reasoning to evaluate:", 1)[1].rsplit("Analyze this", 1)[0]


def _reply(prompt: str):
    s = _slice_text(prompt)
    if "GARBLE" in s:
        return "I cannot tell."
    return f"Checked.\n**{'NO' if 'ERR' in s else 'YES'}** Short rationale."


def _group(responses):
    return Group("g0", "6 bags hold 7 apples each. How many apples?", responses, reference="42",
                 expert="6 * 7 = 42, so \\boxed{42}.")


def test_one_call_per_trace_sees_the_whole_trace():
    judge = ScriptedJudge(_reply)
    (s,) = HolisticScorer(judge=judge).score([_group([TRACE, CLEAN, "\\boxed{13}", "GARBLE \\boxed{42}", "  "])])
    assert judge.generate_batches == [4]  # the empty response is not sent
    assert [_slice_text(p).strip() for p in judge.prompts[:2]] == [TRACE, CLEAN]
    # R = 1 * exact match + 1 * verdict on the whole trace
    assert s.rewards[:3].tolist() == [1.0, 2.0, 1.0]
    assert s.components["n_slices"] == [1, 1, 1, 1, 0]
    assert s.statuses[3:] == [Status.INVALID, Status.INVALID]  # unparseable verdict / nothing to judge


def test_differs_from_slice_level_judging_on_the_same_trace():
    """The slice discriminator localises the error (mean over slices); the holistic one fails the trace."""
    judge = ScriptedJudge(_reply)
    (sl,) = SliceScorer(judge=judge, lambda1=0.0, slice_tokens=20, min_slice_tokens=1).score([_group([TRACE])])
    (ho,) = HolisticScorer(judge=judge, lambda1=0.0).score([_group([TRACE])])
    assert sl.components["n_slices"][0] > 1 and 0 < sl.rewards[0] < 1
    assert ho.rewards.tolist() == [0.0]


def test_logit_mode_soft_verdict():
    judge = ScriptedJudge(probs=lambda prompt, choices: [0.2, 0.8] if "ERR" in prompt else [0.9, 0.1])
    (s,) = HolisticScorer(judge=judge, mode="logit", soft=True, lambda1=0.0).score([_group([TRACE, CLEAN])])
    assert judge.verdict_batches == [2] and s.rewards == pytest.approx([0.2, 0.9])


def test_discriminator_objective_on_whole_traces():
    judge = ScriptedJudge(probs=lambda prompt, choices: [0.2, 0.8] if "ERR" in prompt else [0.9, 0.1])
    obj = HolisticScorer(judge=judge, mode="logit").discriminator_objective([_group([TRACE, CLEAN])])
    assert obj["is_reference"] == [True, False, False]  # one reference trace, two generated traces
    assert obj["R_d"] == pytest.approx(np.log(0.9) + (np.log(0.8) + np.log(0.1)) / 2)


def test_registered_without_slicing_options():
    s = get_scorer("holistic", judge=ScriptedJudge(_reply), mode="logit", threshold="0.7")
    assert isinstance(s, DiscriminatorScorer) and not isinstance(s, SliceScorer) and s.options.threshold == 0.7
    names = {o.name for o in scorer_options("holistic")}
    assert {"judge", "mode", "lambda1", "lambda2", "max_tokens"} <= names
    assert not names & {"slice_tokens", "segmentation", "partial", "context"}


def test_the_whole_trace_is_judged_without_a_context_block():
    judge = ScriptedJudge(_reply)
    HolisticScorer(judge=judge, lambda1=0.0).score([_group([CLEAN])])
    assert judge.prompts == ["Problem:\n6 bags hold 7 apples each. How many apples?\n\nReasoning to evaluate:\n" + CLEAN]


def test_lambda1_zero_turns_the_verifier_off():
    no_reference = Group("g0", "6 bags hold 7 apples each. How many apples?", [CLEAN, TRACE])
    (off,) = HolisticScorer(judge=ScriptedJudge(_reply), lambda1=0.0, lambda2=2.0).score([no_reference])
    assert off.statuses == [Status.OK, Status.OK] and off.rewards.tolist() == [2.0, 0.0]  # lambda2 * verdict
    (on,) = HolisticScorer(judge=ScriptedJudge(_reply)).score([no_reference])
    assert on.statuses == [Status.ABSTAIN] * 2  # R^m needs the reference


@pytest.mark.model
def test_real_model_logit(judge_backend):
    (s,) = HolisticScorer(judge=judge_backend, mode="logit", soft=True, lambda1=0.0).score([_group([CLEAN, "\\boxed{13}"])])
    assert s.statuses == [Status.OK, Status.OK] and s.components["n_slices"] == [1, 1]
    assert np.all((s.rewards >= 0) & (s.rewards <= 1))  # P(YES) of each whole trace
    assert s.cost.judge_calls + s.cost.cache_hits == 2
