"""RARO binary critic (Sec. 3.2): +1/-1 rewards, no tie, one backend call, scripted and real judges."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardkit.backends.base import Completion, VerdictResult
from rewardkit.raro.binary_critic import (
    BinaryCriticScorer,
    binary_critic_messages,
    binary_policy_reward,
    expected_binary_reward,
)
from rewardkit.raro.critic import CriticJudge, CriticScorer
from rewardkit.scoring import describe, get_scorer, scorer_options
from rewardkit.testing import ScriptedJudge
from rewardkit.types import Group, Status
from rewardkit.verdicts import parse_expert_policy

_ANSWER = re.compile(r"<answer>\n(.*?)\n</answer>", re.S)


def _answer(prompt: str) -> str:
    return _ANSWER.search(prompt).group(1)


def _reply(prompt: str):
    """Says Expert for answers holding 42, Policy otherwise; garbles on 'GARBLE', times out on 'TIMEOUT'."""
    a = _answer(prompt)
    if "TIMEOUT" in a:
        return Status.TIMEOUT
    if "GARBLE" in a:
        return "I cannot decide between the two."
    return "Checking the product.\nExpert" if "42" in a else "The product is wrong.\nPolicy"


def _group(responses, expert="6*7 = \\boxed{42}"):
    return Group("g0", "What is 6 times 7?", responses, reference="42", expert=expert)


def test_policy_reward_is_plus_minus_one_and_refuses_a_tie():
    assert binary_policy_reward("expert") == 1.0 and binary_policy_reward("policy") == -1.0
    with pytest.raises(ValueError, match="tie"):
        binary_policy_reward("tie")


def test_expected_reward_is_zero_at_chance_and_antisymmetric():
    assert expected_binary_reward([0.5, 0.5]) == 0.0
    assert expected_binary_reward([0.9, 0.1]) == pytest.approx(-expected_binary_reward([0.1, 0.9]))
    assert expected_binary_reward([1.0, 0.0]) == 1.0


def test_parser_reads_the_final_line_only():
    assert parse_expert_policy("<think>policy? maybe</think>\nIt checks out.\nFinal judgment: Expert").label == "Expert"
    assert parse_expert_policy("The answer is wrong, so\nPolicy").label == "Policy"
    for bad in ("Expert or Policy", "It is not Expert", "An expert would not write this."):
        assert parse_expert_policy(bad).status is Status.INVALID, bad


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parser_never_raises(text):
    v = parse_expert_policy(text)
    assert (v.ok and v.label in ("Expert", "Policy")) or (v.status is Status.INVALID and v.label is None)


def test_generate_mode_rewards_statuses_and_one_call():
    judge = ScriptedJudge(_reply)
    g = _group(["\\boxed{42}", "\\boxed{36}", "GARBLE", "TIMEOUT"])
    h = _group(["\\boxed{41}"], expert=None)  # the binary critic needs no expert answer
    s, t = BinaryCriticScorer(judge=judge).score([g, h])
    assert judge.generate_batches == [5]
    assert s.rewards[:2].tolist() == [1.0, -1.0] and np.isnan(s.rewards[2:]).all()
    assert s.statuses == [Status.OK, Status.OK, Status.INVALID, Status.TIMEOUT]
    assert s.components["critic_label"] == ["expert", "policy", None, None]
    assert s.components["critic_reward"][:2].tolist() == [-1.0, 1.0]
    assert s.stats["fooled_rate"] == 0.5
    assert t.rewards.tolist() == [-1.0] and t.statuses == [Status.OK]
    # the critic sees one answer, never the expert's
    assert all("<answer_1>" not in p and "6*7 =" not in p for p in judge.prompts)


def test_logit_mode_reads_expert_policy_probabilities():
    judge = ScriptedJudge(probs=lambda prompt, choices: [0.8, 0.2] if "42" in _answer(prompt) else [0.3, 0.7])
    (s,) = BinaryCriticScorer(judge=judge, mode="logit").score([_group(["\\boxed{42}", "\\boxed{36}"])])
    assert judge.verdict_batches == [2]
    assert s.rewards == pytest.approx([0.6, -0.4])
    assert s.components["critic_label"] == ["expert", "policy"]
    assert tuple(judge.requests[0].choices) == ("Expert", "Policy")


def test_registered_shares_critic_machinery_and_has_no_tie_options():
    s = get_scorer("critic-binary", judge=ScriptedJudge(_reply), view="final", temperature="0.5")
    # one base (CriticJudge) with the relativistic critic; no replay buffer or critic training batches to fake
    assert isinstance(s, CriticJudge) and not isinstance(s, CriticScorer) and not hasattr(s, "critic_batch")
    assert s.options.view == "final" and s.options.temperature == 0.5
    names = {o.name for o in scorer_options("critic-binary")}
    assert {"judge", "mode", "view", "template", "seed"} <= names and not names & {"tau_pol", "tau_crit"}
    assert "no tie" in describe("critic-binary")
    with pytest.raises(ValueError, match="option 'mode'"):
        BinaryCriticScorer(judge=ScriptedJudge(_reply), mode="logits")


@pytest.mark.model
def test_real_model_logit_mode(judge_backend):
    (s,) = BinaryCriticScorer(judge=judge_backend, mode="logit", view="final").score([_group(["\\boxed{42}", "\\boxed{36}"])])
    assert s.statuses == [Status.OK, Status.OK]
    assert np.all((s.rewards >= -1) & (s.rewards <= 1))
    assert all(abs(sum(p) - 1) < 1e-6 for p in s.extra["critic_probs"])
    assert s.cost.judge_calls + s.cost.cache_hits == 2


# ------------------------------------------------------------------------------ mutation-tested details


def test_a_binary_query_is_one_user_message_in_the_template_chosen():
    (m,) = binary_critic_messages("What is 6 times 7?", "42")
    assert m["role"] == "user"
    assert m["content"].startswith("You are an expert mathematics critic whose goal is to tell whether an answer")
    assert m["content"].endswith("Question:\n<question>\nWhat is 6 times 7?\n</question>\n\nAnswer:\n<answer>\n42\n</answer>")
    (g,) = binary_critic_messages("q", "a", "general")
    assert g["content"].startswith("You are an expert critic whose goal is to tell whether an answer to a question")
    judge = ScriptedJudge(_reply)
    BinaryCriticScorer(judge=judge, template="general", view="final").score([_group(["<think>z</think>\nso \\boxed{42}"])])
    assert judge.prompts[0].startswith("You are an expert critic whose goal") and _answer(judge.prompts[0]) == "42"


def test_the_default_mode_samples_the_critic():
    judge = ScriptedJudge(_reply)
    (s,) = BinaryCriticScorer(judge=judge).score([_group(["\\boxed{42}"])])
    assert judge.generate_batches == [1] and judge.verdict_batches == [] and "critic_outputs" in s.extra


def test_groups_are_scored_in_order_from_one_call():
    judge = ScriptedJudge(_reply)
    answers = (["\\boxed{42}", "\\boxed{1}", "\\boxed{2}"], ["\\boxed{3}", "\\boxed{42}"], ["\\boxed{42}"])
    groups = [Group(f"g{i}", "What is 6 times 7?", a, reference="42") for i, a in enumerate(answers)]
    out = BinaryCriticScorer(judge=judge).score(groups)
    assert judge.generate_batches == [6]
    # only the answers holding 42 pass as the expert's, each group reading its own slice of the one call
    assert [o.group_id for o in out] == ["g0", "g1", "g2"]
    assert [o.rewards.tolist() for o in out] == [[1.0, -1.0, -1.0], [-1.0, 1.0], [1.0]]
    assert out[2].extra["critic_outputs"] == ["Checking the product.\nExpert"]
    assert [o.cost.judge_calls for o in out] == [3, 2, 1] and out[0].cost.prompt_tokens == 30
    assert BinaryCriticScorer(judge=judge).score([]) == [] and judge.generate_batches == [6]


def test_failed_and_unreadable_verdicts_are_masked_with_their_reason():
    judge = ScriptedJudge(_reply)
    (s,) = BinaryCriticScorer(judge=judge).score([_group(["GARBLE", "TIMEOUT"])])
    assert np.isnan(s.rewards).all() and np.isnan(s.components["critic_reward"]).all()
    assert s.components["critic_reward"].dtype == np.float64
    assert s.components["critic_label"] == [None, None]
    assert s.messages[0] and s.messages[1] == "critic backend: scripted timeout"
    assert s.extra["critic_outputs"] == ["I cannot decide between the two.", None]
    assert np.isnan(s.stats["fooled_rate"])  # no verdict read: no rate
    cut = ScriptedJudge(lambda prompt: Completion(["Expert"], finish_reasons=["length"]))
    (c,) = BinaryCriticScorer(judge=cut).score([_group(["\\boxed{42}"])])
    assert c.statuses == [Status.INVALID] and np.isnan(c.rewards[0])


def test_logit_mode_scores_the_two_verdicts_after_the_prefix_and_masks_failures():
    def probs(prompt, choices):
        a = _answer(prompt)
        return Status.TIMEOUT if "TIMEOUT" in a else ([0.25, 0.75] if "36" in a else [0.9, 0.1])

    judge = ScriptedJudge(probs=probs)
    (s,) = BinaryCriticScorer(judge=judge, mode="logit").score([_group(["\\boxed{36}", "\\boxed{42}", "TIMEOUT"])])
    assert judge.requests[0].assistant_prefix == "Final Judgment (Expert or Policy): "
    # E[R_policy] = P(expert) - P(policy): 0.25 - 0.75 and 0.9 - 0.1; the critic's reward is its negative
    assert s.rewards[:2] == pytest.approx([-0.5, 0.8]) and np.isnan(s.rewards[2])
    assert s.components["critic_reward"][:2] == pytest.approx([0.5, -0.8])
    assert s.components["critic_label"] == ["policy", "expert", None]
    assert s.statuses == [Status.OK, Status.OK, Status.TIMEOUT] and s.messages[:2] == [None, None]
    assert s.extra["critic_probs"] == [[0.25, 0.75], [0.9, 0.1], None] and "critic_outputs" not in s.extra
    assert s.stats["fooled_rate"] == 0.5


def test_logit_probabilities_are_recorded_as_floats():
    # a backend may hand back a one-hot distribution as integers; the recorded probabilities are floats all the same
    judge = ScriptedJudge(probs=lambda prompt, choices: VerdictResult(np.array([1, 0])))
    (s,) = BinaryCriticScorer(judge=judge, mode="logit").score([_group(["\\boxed{42}"])])
    assert s.rewards.tolist() == [1.0] and s.components["critic_label"] == ["expert"]
    assert s.extra["critic_probs"] == [[1.0, 0.0]] and all(type(p) is float for p in s.extra["critic_probs"][0])


def test_fooled_rate_is_the_share_of_read_verdicts_saying_expert():
    (s,) = BinaryCriticScorer(judge=ScriptedJudge(_reply)).score([_group(["42", "42", "42", "1", "GARBLE"])])
    assert s.stats == {"fooled_rate": 0.75}


def test_expected_reward_takes_exactly_two_probabilities():
    assert expected_binary_reward(np.array([0.3, 0.7])) == pytest.approx(-0.4)
    with pytest.raises(ValueError):
        expected_binary_reward([0.2, 0.3, 0.5])
