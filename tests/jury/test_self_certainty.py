"""Self-certainty and entropy baselines: distribution statistics, scorers, and real token scoring."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from rewardkit.backends.base import TokenScoreRequest, TokenScores, distribution_stats
from rewardkit.jury.self_certainty import (
    EntropyScorer,
    SelfCertaintyScorer,
    answer_token_mask,
    entropy_reward,
    self_certainty,
)
from rewardkit.scoring import get_scorer
from rewardkit.testing import ScriptedJudge
from rewardkit.types import Group, Status

V = 50


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_uniform_distribution_has_zero_self_certainty_and_entropy_log_v():
    logp = np.full((3, V), -math.log(V))
    h, kl = distribution_stats(logp)
    assert h == pytest.approx([math.log(V)] * 3) and kl == pytest.approx([0.0] * 3, abs=1e-12)
    assert self_certainty(kl) == pytest.approx(0.0, abs=1e-12) and entropy_reward(h) == pytest.approx(-math.log(V))


def test_peaked_distribution_worked_example():
    # p = (1/2, 1/2, 0+, ...) over V=4 with two impossible tokens is the limit; use p = (0.7, 0.1, 0.1, 0.1)
    p = np.array([[0.7, 0.1, 0.1, 0.1]])
    h, kl = distribution_stats(np.log(p))
    assert h[0] == pytest.approx(-(0.7 * math.log(0.7) + 0.3 * math.log(0.1)))
    assert kl[0] == pytest.approx(0.25 * (math.log(0.25 / 0.7) + 3 * math.log(0.25 / 0.1)))


@settings(max_examples=200, deadline=None)
@given(arrays(np.float64, (2, 7), elements=st.floats(-20, 20)), st.floats(-5, 5))
def test_bounds_and_shift_invariance(logits, shift):
    h, kl = distribution_stats(_log_softmax(logits))
    assert np.all(h >= -1e-9) and np.all(h <= math.log(7) + 1e-9) and np.all(kl >= -1e-9)
    h2, kl2 = distribution_stats(_log_softmax(logits + shift))  # softmax ignores a constant shift
    assert h2 == pytest.approx(h, abs=1e-9) and kl2 == pytest.approx(kl, abs=1e-9)


class TokenJudge(ScriptedJudge):
    """Scores a response word by word (a word is a token): 'sure', numbers and the answer box are peaked, others
    uniform; 'FAIL' errors. Offsets are the words' character spans (as a fast tokenizer reports them)."""

    def __init__(self, offsets: bool = True):
        super().__init__()
        self.token_batches: list[int] = []
        self.token_requests: list[TokenScoreRequest] = []
        self.offsets = offsets

    def score_tokens(self, requests: Sequence[TokenScoreRequest]) -> list[TokenScores]:
        self.token_batches.append(len(requests))
        self.token_requests.extend(requests)
        out = []
        for r in requests:
            words = list(re.finditer(r"\S+", r.response))
            if any(w.group() == "FAIL" for w in words):
                out.append(TokenScores(np.array([]), np.array([]), np.array([]), Status.ERROR, error="scripted failure"))
                continue
            peaked = [w.group() == "sure" or "boxed" in w.group() or w.group().isdigit() for w in words]
            logits = np.array([[9.0] + [0.0] * (V - 1) if p else [0.0] * V for p in peaked])
            logp = _log_softmax(logits)
            h, kl = distribution_stats(logp)
            spans = np.array([w.span() for w in words]) if self.offsets else None
            out.append(TokenScores(logp[:, 0], h, kl, Status.OK, 5, V, offsets=spans))
        return out


P_PEAK = math.exp(9.0) / (math.exp(9.0) + V - 1)  # the probability of the peaked token


def test_final_answer_tokens_are_the_default_app_d():
    """App. D: the reward reads only the tokens of the extracted answer. Two responses whose reasoning differs
    in confidence but whose answer tokens are the same get the same reward; over the whole response (the
    formula rewardkit used before issue 21) they differ."""
    judge = TokenJudge()
    g = Group("g", "q", ["sure sure sure \\boxed{7}", "maybe perhaps unsure \\boxed{7}"])
    (sc,) = SelfCertaintyScorer(judge=judge).score([g])
    (en,) = EntropyScorer(judge=judge).score([g])
    assert sc.rewards[0] == sc.rewards[1] == pytest.approx(math.log(P_PEAK))  # one answer token: log p(y_t)
    assert en.rewards[0] == en.rewards[1]
    assert list(sc.components["answer_tokens"]) == [1, 1] and list(sc.components["response_tokens"]) == [4, 4]
    (whole,) = SelfCertaintyScorer(judge=judge, over="whole-response").score([g])
    assert whole.rewards[0] > whole.rewards[1] > 0
    assert whole.rewards[1] == pytest.approx(float(np.mean(judge.score_tokens([TokenScoreRequest([], g.responses[1])])[0].kl_uniform)))


def test_self_certainty_is_the_cumulative_log_probability_of_the_answer():
    """A two-token answer ("12 345", digits grouped by a space): App. D's 'higher cumulative log-probability' is
    the sum over its tokens, so it scores below the one-token answer 12; an unsure token scores lowest."""
    judge = TokenJudge()
    g = Group("g", "q", ["so the answer is 12 345", "so the answer is 12", "so the answer is x"])
    (sc,) = SelfCertaintyScorer(judge=judge).score([g])
    assert sc.rewards[0] == pytest.approx(2 * math.log(P_PEAK))
    assert sc.rewards[1] == pytest.approx(math.log(P_PEAK))
    assert sc.rewards[2] == pytest.approx(-math.log(V))
    assert sc.rewards[1] > sc.rewards[0] > sc.rewards[2]


def test_a_response_without_a_final_answer_abstains():
    """No answer tokens: never the empty sum's 0 (the highest self-certainty); whole-response still scores it."""
    judge = TokenJudge()
    g = Group("g", "q", ["sure sure", "FAIL"])
    (sc,) = SelfCertaintyScorer(judge=judge).score([g])
    assert sc.statuses == [Status.ABSTAIN, Status.ERROR] and math.isnan(sc.rewards[0])
    assert "no final answer" in sc.messages[0] and "scripted failure" in sc.messages[1]
    (whole,) = EntropyScorer(judge=judge, over="whole-response").score([g])
    assert whole.statuses[0] is Status.OK and whole.rewards[0] > -math.log(V)
    (no_offsets,) = SelfCertaintyScorer(judge=TokenJudge(offsets=False)).score([Group("h", "q", ["\\boxed{7}"])])
    assert no_offsets.statuses == [Status.ABSTAIN] and "offsets" in no_offsets.messages[0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=12), st.integers(0, 60), st.integers(0, 60))
def test_answer_mask_is_the_tokens_overlapping_the_answer(widths, a, b):
    ends = np.cumsum(widths)
    offsets = np.stack([ends - np.asarray(widths), ends], axis=1)
    start, end = min(a, b), max(a, b)
    mask = answer_token_mask(offsets, start, end)
    for (s, e), m in zip(offsets, mask, strict=True):
        assert m == (e > s and bool(set(range(s, e)) & set(range(start, end))))


def test_scorers_read_in_one_call_and_mask_failures():
    judge = TokenJudge()
    g = Group("g", "q", ["sure \\boxed{1}", "maybe \\boxed{2}", "FAIL"])
    (sc,) = SelfCertaintyScorer(judge=judge).score([g])
    (en,) = EntropyScorer(judge=judge, over="whole-response").score([g])
    assert judge.token_batches == [3, 3]
    assert sc.statuses[2] is Status.ERROR and math.isnan(sc.rewards[2]) and "scripted failure" in sc.messages[2]
    assert en.components["response_mean_entropy"][1] == pytest.approx((math.log(V) + float(distribution_stats(
        _log_softmax(np.array([[9.0] + [0.0] * (V - 1)])))[0][0])) / 2)
    assert sc.cost.judge_calls == 2  # the failed request is not counted as executed


H_PEAK = math.log(math.exp(9.0) + V - 1) - 9.0 * P_PEAK  # -sum p log p of the peaked token, log p = (9 or 0) - log Z


def test_entropy_reward_is_minus_the_mean_entropy_worked_by_hand():
    """App. D's entropy reward on tiny distributions: a uniform token has entropy log V, the peaked one
    log Z - 9 P (Z = e^9 + V - 1). Over the answer "12 345" (two peaked tokens) it is -H_PEAK, not the
    cumulative log-probability 2 log P_PEAK; over a whole response of uniform tokens it is -log V, not the
    self-certainty 0."""
    judge = TokenJudge()
    (en,) = EntropyScorer(judge=judge).score([Group("g", "q", ["so the answer is 12 345"])])
    assert en.statuses == [Status.OK] and en.rewards[0] == pytest.approx(-H_PEAK)
    assert en.rewards[0] != pytest.approx(2 * math.log(P_PEAK))
    (whole,) = EntropyScorer(judge=judge, over="whole-response").score(
        [Group("h", "q", ["maybe perhaps", "sure maybe"])])
    assert whole.statuses == [Status.OK, Status.OK]
    assert whole.rewards[0] == pytest.approx(-math.log(V))
    assert whole.rewards[1] == pytest.approx(-(H_PEAK + math.log(V)) / 2)


def test_the_system_message_is_sent_before_the_prompt():
    """The ``system`` option is the first message of every scored prompt; without it only the user turn is sent."""
    judge = TokenJudge()
    SelfCertaintyScorer(judge=judge, system="Answer briefly.").score([Group("g", "What is 3+4?", ["\\boxed{7}"])])
    EntropyScorer(judge=judge).score([Group("g", "What is 3+4?", ["\\boxed{7}"])])
    assert [r.messages for r in judge.token_requests] == [
        [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is 3+4?"}],
        [{"role": "user", "content": "What is 3+4?"}]]


def test_groups_without_responses_make_no_backend_call():
    """Nothing to score: no (possibly model-loading) backend call, and each group gets an empty score."""
    judge = TokenJudge()
    out = SelfCertaintyScorer(judge=judge).score([Group("g", "q", []), Group("h", "q", [])])
    assert judge.token_batches == []
    assert [len(s.rewards) for s in out] == [0, 0] and [s.statuses for s in out] == [[], []]
    assert SelfCertaintyScorer(judge=judge).score([]) == [] and judge.token_batches == []


def test_unsupported_backend_raises_a_clear_error():
    with pytest.raises(NotImplementedError, match="cannot score response tokens"):
        get_scorer("entropy", judge=ScriptedJudge("x")).score([Group("g", "q", ["a"])])


@pytest.mark.model
def test_real_model_token_scores_match_the_model_loss_and_batching(judge_backend):
    import torch

    reqs = [TokenScoreRequest([{"role": "user", "content": "What is 6*7?"}], "6*7 = 42."),
            TokenScoreRequest([{"role": "user", "content": "Name a colour."}], "Blue, the colour of the clear sky."),
            TokenScoreRequest([{"role": "user", "content": "x"}], "")]
    together = judge_backend.score_tokens(reqs)
    old = judge_backend.batch_tokens
    judge_backend.batch_tokens = 1  # every row alone: no padding
    try:
        alone = judge_backend.score_tokens(reqs)
    finally:
        judge_backend.batch_tokens = old
    assert [r.status for r in together] == [Status.OK, Status.OK, Status.ERROR]
    for a, b in zip(together[:2], alone[:2], strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4) and a.entropy == pytest.approx(b.entropy, abs=1e-4)
        assert np.all(a.kl_uniform >= 0) and np.all(a.entropy <= math.log(a.vocab_size))
    # the summed response log-probability equals the model's own cross-entropy loss on those tokens
    tok = judge_backend.tokenizer
    prompt = judge_backend.render(reqs[1].messages)
    p_ids = tok(prompt, add_special_tokens=False).input_ids
    ids = tok(prompt + reqs[1].response, add_special_tokens=False).input_ids
    labels = [-100] * len(p_ids) + ids[len(p_ids):]
    with torch.inference_mode():
        loss = judge_backend.model(input_ids=torch.tensor([ids]), labels=torch.tensor([labels])).loss.item()
    n = len(ids) - len(p_ids)
    assert len(together[1].logprobs) == n and together[1].logprobs.sum() == pytest.approx(-loss * n, rel=1e-4)
    (s,) = SelfCertaintyScorer(judge=judge_backend, over="whole-response").score(
        [Group("g", "Name a colour.", [reqs[1].response])])
    assert s.statuses == [Status.OK] and s.rewards[0] == pytest.approx(float(np.mean(together[1].kl_uniform)), rel=1e-5)
    # App. D: the final answer's tokens, located with the tokenizer's own offsets, read independently here by
    # decoding each response token of "6*7 = 42." (the answer 42 is the last number)
    (fa,) = SelfCertaintyScorer(judge=judge_backend).score([Group("g", "What is 6*7?", [reqs[0].response])])
    resp_ids = tok(judge_backend.render(reqs[0].messages) + reqs[0].response, add_special_tokens=False).input_ids
    pieces = [tok.decode([t]) for t in resp_ids[-len(together[0].logprobs):]]
    answer = [k for k, p in enumerate(pieces) if p.strip() in ("4", "2", "42") and k >= len(pieces) - 3]
    assert fa.components["answer_tokens"][0] == len(answer) >= 1
    assert fa.rewards[0] == pytest.approx(float(together[0].logprobs[answer].sum()), abs=1e-4)
