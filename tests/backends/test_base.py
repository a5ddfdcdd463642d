"""The backend contract (``JudgeBackend``): one result per request, in order, checked once for every backend; the
result types, the helpers every backend shares, the base class's defaults and the Hugging Face tokenizer mixin."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rewardkit import get_scorer
from rewardkit.backends.base import (
    DTYPES,
    ChatRequest,
    Completion,
    ContinuationTokens,
    HFChatTemplateMixin,
    JudgeBackend,
    TokenScoreRequest,
    VerdictRequest,
    VerdictResult,
    check_choices,
    choice_probs,
    choice_result,
    continuation_tokens,
    cost_of,
    distribution_stats,
    first_tokens_decide,
    response_offsets,
    whitespace_tokens,
)
from rewardkit.options import Options
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


# ---------------------------------------------------------------------------------------------------------------
# the result types, the shared helpers and the base class's defaults (rewardkit.backends.base)


def test_dtypes_are_the_four_a_local_model_takes():
    assert DTYPES == ("auto", "float32", "bfloat16", "float16")


def test_a_chat_request_defaults_to_one_greedy_unrestricted_sample():
    r = ChatRequest([{"role": "user", "content": "hi"}])
    assert (r.max_tokens, r.temperature, r.top_p, r.n, r.seed, r.stop, r.min_tokens) == (512, 0.0, 1.0, 1, None,
                                                                                         None, 0)


def test_a_completion_reads_its_first_text_and_each_samples_finish_reason():
    c = Completion(["first", "second", "third"], finish_reasons=["stop", ""])
    assert c.text == "first" and c.status is Status.OK and (c.prompt_tokens, c.completion_tokens) == (0, 0)
    assert c.error is None and c.cached is False
    assert c.finish_reason() == "stop" and c.finish_reason(0) == "stop"
    assert c.finish_reason(1) is None  # the backend said nothing for sample 1
    assert c.finish_reason(2) is None  # nor for sample 2 (no entry at all)
    failed = Completion([], Status.TIMEOUT, error="t")
    assert failed.text == "" and failed.finish_reason() is None


def test_a_verdict_result_picks_its_most_likely_choice():
    v = VerdictResult(np.array([0.2, 0.5, 0.3]))
    assert v.best() == 1 and type(v.best()) is int and v.status is Status.OK and v.cached is False
    assert VerdictResult(np.array([0.7, 0.3])).best() == 0


def test_distribution_stats_on_hand_worked_rows():
    # uniform over 4 tokens: H = log 4, KL(U || p) = 0 (float32 in, float64 out);
    # over 3 tokens p = (1/2, 1/4, 1/4): H = 1/2 log 2 + 2 * 1/4 log 4 = 3/2 log 2,
    #   KL(U || p) = sum_j 1/3 log((1/3) / p_j) = -log 3 + 1/3 (log 2 + 2 log 4) = 5/3 log 2 - log 3
    h, kl = distribution_stats(np.log(np.full((2, 4), 0.25, dtype=np.float32)))
    assert h.shape == (2,) and h.dtype == np.float64
    np.testing.assert_allclose(h, [math.log(4)] * 2, rtol=1e-7)
    np.testing.assert_allclose(kl, [0.0, 0.0], atol=1e-7)
    h, kl = distribution_stats([np.log([0.5, 0.25, 0.25])])
    np.testing.assert_allclose(h, [1.5 * math.log(2)], rtol=1e-12)
    np.testing.assert_allclose(kl, [5 / 3 * math.log(2) - math.log(3)], rtol=1e-12)


def test_distribution_stats_reduce_the_last_axis_whatever_comes_before_it():
    # one position [V], and a batch of positions [B, T, V]: the rows' own values, in their shape
    p = np.log([0.5, 0.25, 0.25])
    h, kl = distribution_stats(p)
    assert np.shape(h) == () and h == pytest.approx(1.5 * math.log(2))
    assert kl == pytest.approx(5 / 3 * math.log(2) - math.log(3))
    rows = np.stack([np.stack([p, np.log(np.full(3, 1 / 3))])] * 2)  # [2, 2, 3]
    h, kl = distribution_stats(rows)
    np.testing.assert_allclose(h, [[1.5 * math.log(2), math.log(3)]] * 2, rtol=1e-12)
    np.testing.assert_allclose(kl, [[5 / 3 * math.log(2) - math.log(3), 0.0]] * 2, atol=1e-12)


def test_distribution_stats_reduces_a_torch_tensor_where_it_lives_in_float64():
    torch = pytest.importorskip("torch")
    logp = torch.log(torch.tensor([[0.5, 0.25, 0.25], [1 / 3, 1 / 3, 1 / 3]], dtype=torch.float32))
    h, kl = distribution_stats(logp)
    assert isinstance(h, torch.Tensor) and h.dtype == torch.float64 and kl.dtype == torch.float64
    np.testing.assert_allclose(h.numpy(), [1.5 * math.log(2), math.log(3)], rtol=1e-6)
    np.testing.assert_allclose(kl.numpy(), [5 / 3 * math.log(2) - math.log(3), 0.0], atol=1e-6)
    h, kl = distribution_stats(logp[None])  # [1, 2, V]: still per position
    np.testing.assert_allclose(h.numpy(), [[1.5 * math.log(2), math.log(3)]], rtol=1e-6)
    np.testing.assert_allclose(kl.numpy(), [[5 / 3 * math.log(2) - math.log(3), 0.0]], atol=1e-6)
    h, kl = distribution_stats(logp[0])  # one position [V]
    assert h.shape == () and float(h) == pytest.approx(1.5 * math.log(2), rel=1e-6)


def test_choice_probs_renormalise_over_the_choices_without_overflow():
    np.testing.assert_allclose(choice_probs(np.log([0.2, 0.3])), [0.4, 0.6], rtol=1e-12)
    # huge log-probabilities (or scores) keep their ratio: exp(1000) alone would overflow to inf
    np.testing.assert_allclose(choice_probs(np.array([1000.0, 1000.0 + math.log(3)])), [0.25, 0.75], rtol=1e-12)
    np.testing.assert_allclose(choice_probs(np.array([-1000.0, -1000.0 + math.log(4)])), [0.2, 0.8], rtol=1e-12)


def test_a_verdict_is_an_error_when_its_log_probabilities_are_not_finite():
    """Before, a model whose logits overflowed gave NaN probabilities with an OK status (a verdict nobody read)."""
    ok = choice_result(np.log([0.2, 0.3]), 7)
    assert ok.status is Status.OK and ok.prompt_tokens == 7 and ok.error is None
    np.testing.assert_allclose(ok.probs, [0.4, 0.6], rtol=1e-12)
    # half-precision log-probabilities (exact in float16) are renormalised in float64: 1 / (1 + e^-2) = 0.8807970779...
    half = choice_result(np.array([0.0, -2.0], dtype=np.float16), 7)
    assert half.probs.dtype == np.float64
    np.testing.assert_allclose(half.probs, [0.8807970779778823, 0.11920292202211755], rtol=1e-12)
    masked = choice_result(np.array([-math.inf, 0.0]), 7)  # one impossible choice: probability 0
    assert masked.status is Status.OK and masked.probs.tolist() == [0.0, 1.0]
    for bad in ([math.nan, 0.0], [-math.inf, -math.inf], [math.inf, 0.0], [0.0, math.nan]):
        r = choice_result(np.array(bad), 7)
        assert r.status is Status.ERROR and r.probs.size == 0 and r.prompt_tokens == 7
        assert r.error.startswith("the choices' log-probabilities [") and r.error.endswith("are not finite")


def test_first_tokens_decide_only_when_every_first_token_differs():
    assert first_tokens_decide([[13], [14], [19]])  # A / B / Tie
    assert first_tokens_decide([[13, 5], [14, 5]])
    assert not first_tokens_decide([[16, 17], [16, 18]])  # two choices start with the same token
    assert not first_tokens_decide([[13], [14], [13, 2]])


# A greedy longest-match tokenizer over a tiny vocabulary, HF-style: the text is split at the added tokens first
# (ids 0-3), ``add_special_tokens`` puts BOS (<s>) in front, a chat template in ChatML. Ids worked out by hand below.
VOCAB = {"<s>": 0, "<|im_start|>": 1, "<|im_end|>": 2, "<think>": 3,
         "\n": 10, " ": 11, "{": 12, "A": 13, "B": 14, "{A": 15, "T": 16, "i": 17, "e": 18, "Tie": 19, "x": 20,
         "y": 21, "user": 22, "assistant": 23, "Q": 24, "?": 25}
ADDED = ("<s>", "<|im_start|>", "<|im_end|>", "<think>")


UNK = 99  # a run of characters no token starts with is one unknown token, as WordLevel reads an unknown word


def _spans(text: str) -> list[tuple[int, int, int]]:
    """(id, start, end) of every token of ``text``."""
    out, k = [], 0
    while k < len(text):
        added = next((a for a in ADDED if text.startswith(a, k)), None)
        tok = added or max((t for t in VOCAB if t not in ADDED and text.startswith(t, k)), key=len, default=None)
        if tok is None:
            end = k
            while end < len(text) and not any(text.startswith(t, end) for t in VOCAB):
                end += 1
            out.append((UNK, k, end))
            k = end
            continue
        out.append((VOCAB[tok], k, k + len(tok)))
        k += len(tok)
    return out


def _encode(text: str) -> list[int]:
    return [i for i, _, _ in _spans(text)]


class _Encoding:
    def __init__(self, input_ids, offset_mapping=None):
        self.input_ids, self.offset_mapping = input_ids, offset_mapping


class FakeTokenizer:
    """The slice of a Hugging Face tokenizer that HFChatTemplateMixin uses, with HF's defaults."""

    all_special_ids = [0, 1, 2]  # <think> is an added token but not a special one
    added_tokens_decoder = {0: "<s>", 1: "<|im_start|>", 2: "<|im_end|>", 3: "<think>"}

    def __init__(self, is_fast: bool = True):
        self.is_fast, self.calls = is_fast, 0

    def __call__(self, text, add_special_tokens=True, return_offsets_mapping=False):
        self.calls += 1
        if not isinstance(add_special_tokens, bool):  # as tokenizers: "'None' is not an instance of 'bool'"
            raise TypeError(f"{add_special_tokens!r} is not an instance of 'bool'")
        if isinstance(text, list):
            return _Encoding([self(t, add_special_tokens).input_ids for t in text])
        spans = ([(0, 0, 0)] if add_special_tokens else []) + _spans(text)
        return _Encoding([i for i, _, _ in spans], [(s, e) for _, s, e in spans] if return_offsets_mapping else None)

    def apply_chat_template(self, conversation, add_generation_prompt=False, tokenize=True):
        if conversation and isinstance(conversation[0], list):
            return [self.apply_chat_template(c, add_generation_prompt, tokenize) for c in conversation]
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in conversation)
        text += "<|im_start|>assistant\n" if add_generation_prompt else ""
        return _encode(text) if tokenize else text


class Chat(HFChatTemplateMixin):
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer


USER = [{"role": "user", "content": "Q?"}]
RENDERED = "<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\n"


def test_continuation_tokens_are_what_the_choice_adds_or_the_choice_alone_when_it_merges():
    p = _encode("x{")
    assert p == [20, 12]
    assert continuation_tokens(_encode, "x{", p, "B") == [14]  # x { B
    assert continuation_tokens(_encode, "x{", p, "Tie") == [19]
    assert continuation_tokens(_encode, "x{", p, "TiB") == [16, 17, 14]
    assert _encode("x{A") == [20, 15]  # "{A" is one token: the prompt's "{" merges with the choice
    assert continuation_tokens(_encode, "x{", p, "A") == [13]
    assert _encode("x{AB") == [20, 15, 14]  # merged, and longer than the prompt: still the choice alone
    assert continuation_tokens(_encode, "x{", p, "AB") == [13, 14]
    # the choice vanishes into the prompt's unknown word (x { qq is x { [UNK] as x { q is): the choice alone,
    # never an empty continuation
    assert _encode("x{q") == _encode("x{qq") == [20, 12, UNK]
    assert continuation_tokens(_encode, "x{q", _encode("x{q"), "q") == [UNK]


class _Counting:
    def __init__(self):
        self.texts: list[str] = []

    def __call__(self, text):
        self.texts.append(text)
        return _encode(text)


def test_continuation_tokens_are_computed_once_per_tail_after_the_last_special_token():
    enc = _Counting()
    cont = ContinuationTokens(enc, [0, 1, 2])
    a, b = "<|im_start|>x{", "<s>y<|im_start|>x{"  # special token first / last special token in the middle
    pa, pb = _encode(a), _encode(b)
    assert pa == [1, 20, 12] and pb == [0, 21, 1, 20, 12]
    assert [cont(a, pa, c) for c in ("A", "B")] == [[13], [14]]
    assert enc.texts == [a + "A", "A", a + "B"]
    assert [cont(b, pb, c) for c in ("A", "B")] == [[13], [14]]  # the same tail (x {): nothing re-encoded
    assert enc.texts == [a + "A", "A", a + "B"]
    # a prompt ending in its special token has an empty tail, shared by every such prompt
    c, d = "x<|im_start|>", "y<s><|im_start|>"
    assert cont(c, _encode(c), "A") == [13] and cont(d, _encode(d), "A") == [13]
    assert enc.texts[3:] == [c + "A"]
    # the whole tail is the key: another token right after the special token is another tail
    e = "<|im_start|>y{"
    assert cont(e, _encode(e), "A") == [13] and enc.texts[4:] == [e + "A", "A"]
    # an empty prompt (no special token, nothing before the choice): the choice alone
    assert cont("", [], "B") == [14] and enc.texts[6:] == ["B"]
    # a one-token tail, after a special token at the start or in the middle: shared
    f, g = "<|im_start|>x", "y<|im_start|>x"
    assert cont(f, _encode(f), "B") == [14] and cont(g, _encode(g), "B") == [14] and enc.texts[7:] == [f + "B"]


def test_a_prompt_without_a_special_token_is_its_own_key():
    enc = _Counting()
    cont = ContinuationTokens(enc, [0, 1, 2])
    assert cont("x{", _encode("x{"), "A") == [13] and cont("y{", _encode("y{"), "A") == [13]
    assert enc.texts == ["x{A", "A", "y{A", "A"]  # "y{" is not "x{": computed again
    assert cont("x{", _encode("x{"), "A") == [13] and len(enc.texts) == 4  # the same prompt again: known
    # without special ids every prompt is its own tail
    enc2 = _Counting()
    cont2 = ContinuationTokens(enc2, [])
    for t in ("<|im_start|>x{", "<s>y<|im_start|>x{"):
        assert cont2(t, _encode(t), "B") == [14]
    assert enc2.texts == ["<|im_start|>x{B", "<s>y<|im_start|>x{B"]


def test_hf_mixin_renders_the_chat_template_with_the_generation_prompt_and_prefix():
    chat = Chat(FakeTokenizer())
    assert chat.render(USER) == RENDERED
    assert chat.render(USER, "{") == RENDERED + "{"
    two = [USER, [{"role": "user", "content": "x"}]]
    rendered2 = "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n"
    assert chat.render_many(two) == [RENDERED, rendered2]
    assert chat.render_many(two, ["{", "T"]) == [RENDERED + "{", rendered2 + "T"]
    assert chat.render_many([]) == [] and chat.render_many([], []) == []
    for short in (["{"], []):  # a prefix per conversation, no fewer (none is None, not [])
        with pytest.raises(ValueError):
            chat.render_many(two, short)


def test_hf_mixin_encodes_and_counts_without_special_tokens():
    tok = FakeTokenizer()
    chat = Chat(tok)
    assert chat.encode("x{A") == [20, 15]
    assert chat.encode_many(["x{A", "Q? x"]) == [[20, 15], [24, 25, 11, 20]]
    calls = tok.calls
    assert chat.encode_many([]) == [] and tok.calls == calls  # nothing to encode: the tokenizer is not called
    assert chat.count_tokens(["x{A", "Q? x", ""]) == [2, 4, 0]
    assert chat.encode_with_offsets("x{A") == ([20, 15], [(0, 1), (1, 3)])
    assert Chat(FakeTokenizer(is_fast=False)).encode_with_offsets("x{A") == ([20, 15], None)

    class NoFastFlag:  # a tokenizer that does not say whether it is fast is read as a slow one
        def __call__(self, text, add_special_tokens=True, return_offsets_mapping=False):
            assert not return_offsets_mapping
            return FakeTokenizer()(text, add_special_tokens)

    assert Chat(NoFastFlag()).encode_with_offsets("x{A") == ([20, 15], None)


def test_hf_mixin_continuations_cut_at_special_and_added_tokens():
    tok = FakeTokenizer()
    cont = Chat(tok).continuations()
    a, b = "<think>x{", "y<think>x{"  # <think> is added but not special: still a cut
    assert cont(a, _encode(a), "B") == [14]
    calls = tok.calls
    assert cont(b, _encode(b), "B") == [14] and tok.calls == calls
    assert cont.special == {0, 1, 2, 3}

    class OldTokenizer(FakeTokenizer):  # no added_tokens_decoder: the special ids alone
        added_tokens_decoder = property(lambda self: (_ for _ in ()).throw(AttributeError("no")))

    assert Chat(OldTokenizer()).continuations().special == {0, 1, 2}


def test_response_offsets_are_the_last_tokens_spans_within_the_response():
    # prompt "Q? " (3 characters) + response "xy{A": tokens Q ? ' ' x y {A
    offsets = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 7)]
    got = response_offsets(offsets, 3, 3)
    assert got.dtype == np.int64 and got.tolist() == [[0, 1], [1, 2], [2, 4]]
    # prompt "Q? x" (4 characters) + response "y{A"
    assert response_offsets(offsets, 2, 4).tolist() == [[0, 1], [1, 3]]
    # a token merged across the boundary (starting in the prompt) starts at 0
    assert response_offsets([(0, 2), (2, 5)], 1, 3).tolist() == [[0, 2]]
    assert response_offsets(None, 3, 3) is None
    # no response tokens: no spans (offsets[-0:] would be every token of the prompt)
    for none in (response_offsets(offsets, 0, 7), response_offsets([], 0, 0)):
        assert none.shape == (0, 2) and none.dtype == np.int64


def test_whitespace_tokens_count_words():
    assert whitespace_tokens(["a b  c", "", " x\n y\t"]) == [3, 0, 2]


def test_cost_of_counts_calls_and_tokens_and_a_cache_hit_as_neither():
    results = [Completion(["a"], prompt_tokens=10, completion_tokens=5),
               Completion(["b"], prompt_tokens=100, completion_tokens=50, cached=True),
               VerdictResult(np.array([1.0]), prompt_tokens=7),
               VerdictResult(np.array([]), Status.ERROR, prompt_tokens=3),  # a failed request was still a call
               VerdictResult(np.array([1.0]), prompt_tokens=9, cached=True)]
    c = cost_of(results)
    assert (c.judge_calls, c.prompt_tokens, c.completion_tokens, c.cache_hits) == (3, 20, 5, 2)
    assert (c.verifier_calls, c.seconds) == (0, 0.0)
    assert cost_of([]) == type(c)()


class Minimal(JudgeBackend):
    """The least a backend writes: the two abstract calls."""

    model_id = "org/judge@bf16"

    def generate(self, requests):
        return [Completion(["ok"]) for _ in requests]

    def verdict_probs(self, requests):
        return [VerdictResult(np.array([1.0])) for _ in requests]


def test_a_backend_inherits_defaults_that_name_its_model():
    b = Minimal()
    assert b.cache_identity() == b.describe() == b.served_name() == "org/judge@bf16"
    assert Minimal.locate("anything") is None and b.check() is None and b.close() is None
    assert b.count_tokens(["one two three", ""]) == [3, 0]
    assert b.context_length() is None
    assert (JudgeBackend.Options, JudgeBackend.open_options, JudgeBackend.model_id) == (Options, False, "")
    assert JudgeBackend.default_mode == "generate"
    req = VerdictRequest(USER, ["A", "B"])
    with pytest.raises(NotImplementedError, match=r"^Minimal does not expose next-token log-probabilities$"):
        b.top_logprobs([req], 5)
    with pytest.raises(NotImplementedError, match=r"^Minimal cannot score response tokens: .*transformers"):
        b.score_tokens([TokenScoreRequest(USER, "x")])


def test_every_batched_call_is_checked_and_keeps_its_name_and_arguments():
    class Short(Minimal):
        def generate(self, requests):
            """Generate, dropping one."""
            return [Completion(["ok"])] * (len(requests) - 1)

        def verdict_probs(self, requests):
            return (VerdictResult(np.array([1.0])) for _ in range(len(requests) + 1))

        def top_logprobs(self, requests, k=20):
            return [k] * (len(requests) + 1)

        def score_tokens(self, requests):
            return []

    s = Short()
    with pytest.raises(RuntimeError, match=r"^judge backend Short\.generate returned 1 results for 2 requests$"):
        s.generate([ChatRequest(USER)] * 2)
    with pytest.raises(RuntimeError, match=r"^judge backend Short\.verdict_probs returned 2 results for 1 requests$"):
        s.verdict_probs([VerdictRequest(USER, ["A"])])
    with pytest.raises(RuntimeError, match=r"^judge backend Short\.top_logprobs returned 2 results for 1 requests$"):
        s.top_logprobs([VerdictRequest(USER, ["A"])], k=3)
    with pytest.raises(RuntimeError, match=r"^judge backend Short\.score_tokens returned 0 results for 1 requests$"):
        s.score_tokens([TokenScoreRequest(USER, "x")])
    assert Short.generate.__name__ == "generate" and Short.generate.__doc__ == "Generate, dropping one."

    class Right(Short):
        def top_logprobs(self, requests, k=20):
            return [k] * len(requests)

    assert Right().top_logprobs([VerdictRequest(USER, ["A"])], k=3) == [3]  # k reaches the backend
    assert Right().top_logprobs([VerdictRequest(USER, ["A"])]) == [20]


def test_a_checked_call_reassigned_in_a_subclass_is_checked_once():
    class Alias(Minimal):
        verdict_probs = Minimal.verdict_probs  # already checked: kept as it is, not wrapped a second time

    assert Alias.verdict_probs is Minimal.verdict_probs
    assert Alias.verdict_probs.__wrapped__ is Minimal.__dict__["verdict_probs"].__wrapped__
    assert not hasattr(Alias.verdict_probs.__wrapped__, "__wrapped__")  # one check around the backend's own call
    assert [r.probs.tolist() for r in Alias().verdict_probs([VerdictRequest(USER, ["A"])])] == [[1.0]]


def test_check_choices_refuses_requests_no_probability_can_be_read_for():
    msg = [{"role": "user", "content": "Which is better?"}]
    check_choices([VerdictRequest(msg, ("A", "B", "Tie")), VerdictRequest(msg, ["YES"])])  # fine: nothing raised
    bad = {(): "no choices to score", ("A", ""): "every choice must be a non-empty string",
           ("A", None): "every choice must be a non-empty string", ("A", "B", "A"): "a choice given twice"}
    for choices, says in bad.items():
        with pytest.raises(ValueError, match=f"^verdict request 1: {says}"):
            check_choices([VerdictRequest(msg, ("A", "B")), VerdictRequest(msg, choices)])
