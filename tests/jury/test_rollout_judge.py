"""JURY-RL LLM-as-a-Judge on every rollout (App. D), beside the majority-only llm-judge scorer."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from rewardkit.answers import extract_answer
from rewardkit.jury.proof_gate import LLMJudgeScorer
from rewardkit.jury.rollout_judge import CUT_MARK, RolloutJudgeScorer, response_tail
from rewardkit.scoring import describe, get_scorer
from rewardkit.testing import ScriptedJudge, whitespace_tokens
from rewardkit.types import Group, Status

_ANSWER = re.compile(r"Answer: (.*)$", re.S)


def _answer(prompt: str) -> str:
    """What the judge was shown as the answer (the response, cut to the judge's budget)."""
    return _ANSWER.search(prompt).group(1).strip()


def _reply(prompt: str):
    """A judge that knows 6*7 = 42 (it reads the shown response's final answer); 'garble' gets no verdict,
    99 times out."""
    a = extract_answer(_answer(prompt))
    if a == "99":
        return Status.TIMEOUT
    if a == "garble":
        return "Hard to say."
    return "6*7 is 42.\nFinal judgment: " + ("True" if a == "42" else "False")


def _group(responses, gid="g0"):
    return Group(gid, "What is 6 times 7?", responses)


def test_each_rollout_judged_in_one_call():
    judge = ScriptedJudge(_reply)
    g = _group(["so \\boxed{42}", "\\boxed{36}", "\\boxed{42}", "no answer here", "\\boxed{garble}", "\\boxed{99}"])
    h = _group(["\\boxed{13}"], gid="g1")
    s, t = RolloutJudgeScorer(judge=judge).score([g, h])
    assert judge.generate_batches == [6]  # the answerless response is not sent
    assert [_answer(p) for p in judge.prompts] == ["so \\boxed{42}", "\\boxed{36}", "\\boxed{42}", "\\boxed{garble}",
                                                  "\\boxed{99}", "\\boxed{13}"]
    assert s.rewards[:4].tolist() == [1.0, 0.0, 1.0, 0.0] and np.isnan(s.rewards[4:]).all()
    assert s.statuses == [Status.OK] * 4 + [Status.INVALID, Status.TIMEOUT]
    assert (s.group_id, t.group_id) == ("g0", "g1")
    # a failure is never silently a 0: each non-ok response says why; a judged or answerless one is plain
    assert s.messages[:4] == [None, None, None, "no final answer in the response: not judged, reward 0"]
    assert s.messages[4].startswith("judge gave no verdict: no True/False verdict") and "'Hard to say.'" in s.messages[4]
    assert s.messages[5] == "judge gave no verdict: judge timeout: scripted timeout"
    assert s.components["answer"][:2] == ["42", "36"]
    assert t.rewards.tolist() == [0.0] and t.messages == [None]
    # 5 of g's responses went to the judge, 4 answered (10 prompt tokens each, 5 completion tokens per
    # judgment; the timed-out call has no tokens), and h's one
    assert (s.cost.judge_calls, t.cost.judge_calls) == (5, 1)
    assert (s.cost.prompt_tokens, s.cost.completion_tokens, t.cost.prompt_tokens) == (40, 20, 10)
    assert all((r.max_tokens, r.temperature, r.n) == (512, 0.0, 1) for r in judge.requests)  # the defaults


def test_the_judge_sees_the_reasoning_and_the_final_answer():
    """App. D: the judge "assesses the reasoning process and the final answer of each rollout": it is shown the
    whole response, its <think> reasoning included (issue 29: it used to get the trunk, without the block)."""
    judge = ScriptedJudge(_reply)
    response = "<think>6 * 7 = 6 * 5 + 6 * 2 = 30 + 12</think>So 6 * 7 = 42, and the answer is \\boxed{42}."
    (s,) = RolloutJudgeScorer(judge=judge).score([_group([response])])
    assert _answer(judge.prompts[0]) == response and s.rewards.tolist() == [1.0]


def test_an_unclosed_think_block_is_read_the_same_by_extraction_and_the_judge():
    """A policy cut off inside <think>: the answer is extracted from the block, so the judge is shown that same
    block, not the empty trunk it used to get (issue 29)."""
    judge = ScriptedJudge(_reply)
    response = "<think>6 * 7: six sevens are 42, so \\boxed{42}"
    (s,) = RolloutJudgeScorer(judge=judge).score([_group([response])])
    assert _answer(judge.prompts[0]) == response
    assert s.components["answer"] == ["42"] and s.rewards.tolist() == [1.0]


def test_a_long_response_is_cut_from_the_front_to_the_judges_budget():
    """Over ``response_tokens`` (the judge's tokenizer; ScriptedJudge counts whitespace words), the response is
    cut at a word boundary from the front behind a mark, so the reasoning's end and the final answer stay."""
    judge = ScriptedJudge(_reply)
    reasoning = " ".join(f"step{k}" for k in range(500))
    response = f"{reasoning} so 6 * 7 = 42 and \\boxed{{42}}"
    (s,) = RolloutJudgeScorer(judge=judge, response_tokens=50).score([_group([response])])
    shown = _answer(judge.prompts[0])
    # the mark is 14 words, so 36 of the response's stay: its last 8 words and step472 ... step499 (50 in all)
    tail = " ".join(f"step{k}" for k in range(472, 500)) + " so 6 * 7 = 42 and \\boxed{42}"
    assert shown == CUT_MARK + tail and judge.count_tokens([shown]) == [50] and s.rewards.tolist() == [1.0]
    assert response_tail("short \\boxed{1}", 50, judge.count_tokens, 7) == "short \\boxed{1}"
    exact = "so 6 * 7 = \\boxed{42}"  # 6 words: exactly the budget, kept whole
    assert response_tail(exact, 6, judge.count_tokens, exact.index("42")) == exact
    # an answer longer than the budget is never cut: the text is kept from the answer's word on
    long_answer = "reasoning here \\boxed{" + " + ".join(["1"] * 40) + "}"
    kept = response_tail(long_answer, 10, judge.count_tokens, long_answer.index("{") + 1)
    assert kept == CUT_MARK + long_answer[long_answer.index("\\boxed"):]
    # the scorer keeps it from the answer's start, not its end: the judge reads the whole boxed sum
    (s,) = RolloutJudgeScorer(judge=judge, response_tokens=10).score([_group([long_answer])])
    assert _answer(judge.prompts[-1]) == kept


def test_the_tail_is_never_cut_past_keep_from():
    """The kept text starts at the last word start at or before ``keep_from``, never after it: with a budget of 1
    nothing fits behind the mark, so each position of "ab cd ef" keeps its own word (a space: the word
    before it), and a position in the first word keeps the text whole (nothing before it to cut)."""
    text = "ab cd ef"  # a0 b1 _2 c3 d4 _5 e6 f7
    kept = [response_tail(text, 1, whitespace_tokens, k) for k in range(len(text))]
    assert kept == [text] * 3 + [CUT_MARK + "cd ef"] * 3 + [CUT_MARK + "ef"] * 2


def test_the_longest_tail_that_fits_may_drop_only_the_first_word():
    """With a tokenizer counting characters a long unbroken formula is many tokens: dropping it alone makes room
    for the mark, so the kept tail starts right after it (the first word start)."""
    def chars(texts):
        return [len(t) for t in texts]

    formula = "+".join(["1"] * 50) + "=50"  # 102 characters, no space
    text = formula + " so the sum is \\boxed{50}"  # 127 characters
    assert len(CUT_MARK) < 102
    assert response_tail(text, 126, chars, text.index("50}")) == CUT_MARK + "so the sum is \\boxed{50}"


def test_leading_whitespace_before_an_over_budget_answer_is_no_cut():
    """A reply that opens with a newline and whose first word holds an answer longer than the budget: nothing
    stands before the answer, so nothing is cut and the judge is told of no cut (it used to get the mark)."""
    judge = ScriptedJudge(_reply)
    response = "\n\\boxed{" + " + ".join(["1"] * 40) + "}"  # 80 whitespace tokens, over a budget of 10
    (s,) = RolloutJudgeScorer(judge=judge, response_tokens=10).score([_group([response])])
    assert _answer(judge.prompts[0]) == response.strip() and s.statuses == [Status.OK]
    assert response_tail(response, 10, judge.count_tokens, response.index("{") + 1) == response


def test_a_cut_off_rollout_without_a_final_answer_abstains():
    """Issue 34: a rollout the policy's budget cut mid-reasoning ("... Then maybe it's 41 or") states no answer: its
    last number is a step, not a conclusion, so nothing is judged and the response abstains (a True judge used to
    reward 41). A finished response with no answer still gets 0; one whose answer stands before the cut is judged."""
    judge = ScriptedJudge("Looks right.\nFinal judgment: True")  # a judge that says True to anything
    cut = "Let me see: 6 * 7 could be 36, no. Adding 6 seven times: 6, 12, 18, 24, 30, 36, 41. Then maybe it's 41 or"
    open_think = "<think>6 * 7: 6 * 5 = 30 and 6 * 2 = 12, so 30 + 12 = 42. Now check with 7 * 6"
    stated = "The answer is 42. Let me double-check: 6 * 7 = 6 * 5 + 6 * 2 = 30 +"
    (s,) = RolloutJudgeScorer(judge=judge).score([_group([cut, open_think, "I do not know.", stated])])
    assert s.statuses == [Status.ABSTAIN, Status.ABSTAIN, Status.OK, Status.OK]
    assert np.isnan(s.rewards[:2]).all() and s.rewards[2:].tolist() == [0.0, 1.0]
    why = " and states no final answer: a number from unfinished reasoning is no answer; not judged, abstained"
    assert s.messages[0].startswith("the response was cut off mid-reasoning (it stops mid-sentence (")
    assert "Then maybe it's 41 or" in s.messages[0] and s.messages[0].endswith(why)
    assert s.messages[1] == "the response was cut off mid-reasoning (its <think> block is never closed)" + why
    assert s.messages[2] == "no final answer in the response: not judged, reward 0" and s.messages[3] is None
    assert s.components["answer"] == [None, None, None, "42"] and len(judge.prompts) == 1


def test_the_judge_sees_the_papers_budget_cut_only_where_its_context_ends():
    """JURY-RL Table 7: rollouts of up to 3,072 new tokens, all shown to the judge (it used to be cut at 2,048);
    a judge whose context is smaller gets the response cut from the front to what fits beside its prompt and
    its judgment."""
    judge = ScriptedJudge(_reply)
    reasoning = " ".join(f"step{k}" for k in range(2999))
    response = f"{reasoning} so \\boxed{{42}}"  # 3,001 whitespace tokens
    assert RolloutJudgeScorer.Options().response_tokens == 3072
    (s,) = RolloutJudgeScorer(judge=judge).score([_group([response])])
    assert _answer(judge.prompts[0]) == response and s.rewards.tolist() == [1.0]  # no context known: all of it
    judge.context_length = lambda: 4096  # room for the whole rollout beside the prompt and 512 judgment tokens
    RolloutJudgeScorer(judge=judge).score([_group([response])])
    assert _answer(judge.prompts[-1]) == response
    judge.context_length = lambda: 2000  # a small judge: cut from the front, the answer kept
    RolloutJudgeScorer(judge=judge).score([_group([response])])
    shown = _answer(judge.prompts[-1])
    assert shown.startswith(CUT_MARK.strip()) and shown.endswith("so \\boxed{42}")
    full_prompt = sum(judge.count_tokens([m["content"] for m in judge.requests[-1].messages]))
    # filled up to the context (whitespace tokens: each word cut frees one), less the template's 32 and the
    # judgment's 512
    assert full_prompt == 2000 - 32 - 512
    RolloutJudgeScorer(judge=judge, max_tokens=100).score([_group([response])])  # a shorter judgment: more shown
    assert sum(judge.count_tokens([m["content"] for m in judge.requests[-1].messages])) == 2000 - 32 - 100
    assert judge.requests[-1].max_tokens == 100
    judge.context_length = lambda: 100  # not even the prompt fits: the least is shown, the answer's word
    RolloutJudgeScorer(judge=judge).score([_group(["so \\boxed{42}"])])
    assert _answer(judge.prompts[-1]) == CUT_MARK + "\\boxed{42}"


def test_a_logit_judge_leaves_room_for_its_verdict_only():
    """Logit mode generates nothing: only "Final judgment: True" (16 tokens kept) follows the prompt, not the
    512-token judgment budget of generate mode."""
    judge = ScriptedJudge(probs=[0.9, 0.1])
    judge.context_length = lambda: 2000
    response = " ".join(f"step{k}" for k in range(2999)) + " so \\boxed{42}"
    (s,) = RolloutJudgeScorer(judge=judge, mode="logit").score([_group([response])])
    assert sum(judge.count_tokens([m["content"] for m in judge.requests[-1].messages])) == 2000 - 32 - 16
    assert _answer(judge.prompts[-1]).endswith("so \\boxed{42}") and s.rewards.tolist() == [1.0]


def test_differs_from_the_majority_only_judge():
    """A wrong majority: the majority judge gives nobody credit; the per-rollout judge rewards the right one."""
    g = _group(["\\boxed{36}", "\\boxed{36}", "\\boxed{42}"])
    maj_judge, each_judge = ScriptedJudge(_reply), ScriptedJudge(_reply)
    (m,) = LLMJudgeScorer(judge=maj_judge).score([g])
    (e,) = RolloutJudgeScorer(judge=each_judge).score([g])
    assert m.rewards.tolist() == [0.0, 0.0, 0.0] and len(maj_judge.requests) == 1
    assert e.rewards.tolist() == [0.0, 0.0, 1.0] and len(each_judge.requests) == 3


def test_samples_majority_and_even_split_masks():
    votes = iter([["True", "False", "True"], ["True", "False"]])
    judge = ScriptedJudge(lambda prompt: next(votes))
    (s,) = RolloutJudgeScorer(judge=judge, samples=3).score([_group(["\\boxed{42}"])])
    assert s.rewards.tolist() == [1.0]
    (s,) = RolloutJudgeScorer(judge=judge, samples=2).score([_group(["\\boxed{42}"])])
    assert math.isnan(s.rewards[0]) and s.statuses == [Status.INVALID]
    assert s.messages == ["judge gave no verdict: judge: 1 True / 1 False"]
    assert [(r.n, r.temperature) for r in judge.requests] == [(3, 0.7), (2, 0.7)]  # sampled: at least 0.7


def test_the_judges_temperature_and_budget_reach_its_requests():
    judge = ScriptedJudge(_reply)
    RolloutJudgeScorer(judge=judge, temperature=0.3, max_tokens=64).score([_group(["\\boxed{42}"])])
    (r,) = judge.requests
    assert (r.temperature, r.max_tokens, r.n) == (0.3, 64, 1)


def test_logit_mode_thresholds_p_true():
    judge = ScriptedJudge(probs=lambda prompt, choices: [0.8, 0.2] if extract_answer(_answer(prompt)) == "42" else [0.3, 0.7])
    (s,) = RolloutJudgeScorer(judge=judge, mode="logit").score([_group(["\\boxed{42}", "\\boxed{36}"])])
    assert judge.verdict_batches == [2] and s.rewards.tolist() == [1.0, 0.0]
    assert s.components["p_true"] == pytest.approx([0.8, 0.3])


def test_registered_names_say_which_is_which():
    assert "majority" in describe("llm-judge") and "every rollout" in describe("llm-judge-rollout")
    s = get_scorer("llm-judge-rollout", judge=ScriptedJudge(_reply), samples="3")
    assert isinstance(s, RolloutJudgeScorer) and s.options.samples == 3
    with pytest.raises(ValueError, match="option 'samples'"):
        RolloutJudgeScorer(judge=ScriptedJudge(_reply), samples=0)
    for bad, says in [({"max_tokens": 0}, "option 'max_tokens': must be >= 1, got 0"),
                      ({"response_tokens": 0}, "option 'response_tokens': must be >= 1, got 0"),
                      ({"temperature": -0.5}, "option 'temperature': must be >= 0, got -0.5")]:
        with pytest.raises(ValueError, match=re.escape(says)):
            RolloutJudgeScorer(judge=ScriptedJudge(_reply), **bad)


@pytest.mark.model
def test_real_model_logit(judge_backend):
    (s,) = RolloutJudgeScorer(judge=judge_backend, mode="logit").score([_group(["\\boxed{42}", "\\boxed{36}"])])
    assert s.statuses == [Status.OK, Status.OK] and set(s.rewards.tolist()) <= {0.0, 1.0}
    assert np.all((s.components["p_true"] > 0) & (s.components["p_true"] < 1))
