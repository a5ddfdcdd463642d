"""transformers backend: padding invariance, shared-prefix KV reuse, top log-probs, dtype selection."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from rewardkit.backends import ChatRequest, VerdictRequest, load_backend, parse_spec
from rewardkit.backends.base import continuation_tokens
from rewardkit.backends.transformers_backend import TransformersBackend, token_batches
from rewardkit.types import Status

PROBLEM = "Find the sum of all positive divisors of 12."
TRACE = "The divisors of 12 are 1, 2, 3, 4, 6 and 12. Their sum is 28. So the answer is \\boxed{28}."
ANCHORS = ["1+2+3+4+6+12 = 28, so \\boxed{28}.", "The divisors are 1, 2, 3, 4, 6, 12; sum 27. \\boxed{27}",
           "Sum of divisors function: sigma(12) = (1+2+4)(1+3) = 28. \\boxed{28}"]


def tournament(anchor: str, problem: str = PROBLEM) -> VerdictRequest:
    text = (f"Compare the two solution attempts below and decide which is better.\n\n[PROBLEM]\n\n{problem}\n\n"
            f"[RESPONSE A]\n\n{TRACE}\n\n[RESPONSE B]\n\n{anchor}\n\nWhich response is better?")
    return VerdictRequest([{"role": "user", "content": text}], ["A", "B", "Tie"], "\\boxed{")


def test_specs_parse():
    assert parse_spec("smollm2") == ("transformers", {"model": "smollm2"})
    assert parse_spec("/models/judge") == ("transformers", {"model": "/models/judge"})
    assert parse_spec("hf:Org/Name") == ("transformers", {"model": "Org/Name"})
    assert parse_spec("vllm:Qwen/Qwen3-8B") == ("vllm", {"model": "Qwen/Qwen3-8B"})
    assert parse_spec("llamacpp:/m/x.gguf") == ("llamacpp", {"model": "/m/x.gguf"})
    assert parse_spec("http://h:1/v1?model=a/b") == ("http", {"base_url": "http://h:1/v1", "model": "a/b"})
    assert parse_spec("openai:a@b@https://h/v1") == ("http", {"base_url": "https://h/v1", "model": "a@b"})
    for bad in ("", "http://h/v1#foo=1", "openai:name", "vllm:", "llamacpp:"):
        with pytest.raises(ValueError, match="spec"):
            parse_spec(bad)


@pytest.mark.model
def test_prefix_sharing_gives_the_same_probabilities(judge_backend):
    reqs = [tournament(a) for a in ANCHORS] + [tournament(ANCHORS[0], "What is 3*7?")]
    prompts = [judge_backend.encode(judge_backend.render(r.messages, r.assistant_prefix)) for r in reqs]
    groups, rest = judge_backend._prefix_groups(prompts, list(range(len(reqs))))
    assert [sorted(m) for _, m in groups] == [[0, 1, 2]] and rest == [3]  # the other problem is not merged
    plen = groups[0][0]
    assert all(p[:plen] == prompts[0][:plen] for p in prompts[:3]) and plen < min(map(len, prompts[:3]))
    try:
        judge_backend.share_prefix = True
        shared = judge_backend.verdict_probs(reqs)
        judge_backend.share_prefix = False
        plain = judge_backend.verdict_probs(reqs)
    finally:
        judge_backend.share_prefix = True
    for s, p in zip(shared, plain, strict=True):
        assert s.status is Status.OK and s.probs.shape == (3,) and s.prompt_tokens == p.prompt_tokens
        np.testing.assert_allclose(s.probs, p.probs, atol=2e-5)
        assert abs(s.probs.sum() - 1) < 1e-9


@pytest.mark.model
def test_top_logprobs_agree_with_verdict_probs(judge_backend):
    req = VerdictRequest([{"role": "user", "content": "Is 7 prime? Answer YES or NO."}], (), "**")
    [top] = judge_backend.top_logprobs([req], 10)
    assert top.status is Status.OK and len(top.tokens) == 10
    lps = [lp for _, lp in top.tokens]
    assert lps == sorted(lps, reverse=True) and np.exp(lps).sum() <= 1 + 1e-6
    a, b = top.tokens[0][0], top.tokens[1][0]
    [v] = judge_backend.verdict_probs([VerdictRequest(req.messages, [a, b], "**")])
    expected = np.exp([top.tokens[0][1], top.tokens[1][1]])
    np.testing.assert_allclose(v.probs, expected / expected.sum(), atol=1e-5)


@pytest.mark.model
def test_batched_generation_matches_one_by_one(judge_backend):
    reqs = [ChatRequest([{"role": "user", "content": q}], max_tokens=6) for q in
            ("Hi.", "Please list three prime numbers greater than ten, separated by commas.")]
    together = judge_backend.generate(reqs)
    alone = [judge_backend.generate([r])[0] for r in reqs]
    assert [c.texts for c in together] == [c.texts for c in alone]
    assert all(c.completion_tokens <= 6 and c.status is Status.OK for c in together)
    forced = judge_backend.generate([ChatRequest(reqs[0].messages, max_tokens=6, min_tokens=6)])[0]
    assert forced.completion_tokens == 6 and forced.finish_reasons == ["length"]


@pytest.mark.model
def test_bf16_backend_is_close_to_fp32(judge_backend):
    bf = load_backend("smollm2", dtype="bfloat16")
    assert bf is not judge_backend and bf.model_id.endswith("@bfloat16")
    reqs = [tournament(a) for a in ANCHORS[:2]]
    for x, y in zip(bf.verdict_probs(reqs), judge_backend.verdict_probs(reqs), strict=True):
        assert x.status is Status.OK
        np.testing.assert_allclose(x.probs, y.probs, atol=0.08)


def test_token_batches_fill_a_budget_of_padded_tokens():
    widths = {0: 100, 1: 120, 2: 300, 3: 310, 4: 900, 5: 5000}
    out = token_batches(sorted(widths, key=widths.get), widths.get, budget=1000)
    assert out == [[0, 1, 2], [3], [4], [5]]  # 3 x 300 fits, 4 x 310 would not; a row over budget goes alone
    assert all(len(b) * max(widths[i] for i in b) <= 1000 for b in out if len(b) > 1)
    assert token_batches(list(range(5)), lambda i: 10, budget=1000, max_rows=2) == [[0, 1], [2, 3], [4]]
    assert sorted(i for b in out for i in b) == sorted(widths)  # nothing lost or repeated


@pytest.mark.parametrize("kw, message", [({"batch_tokens": 0}, "batch_tokens"), ({"batch_size": -1}, "batch_size"),
                                         ({"dtype": "fp8"}, "dtype"), ({"device": "cuda:0"}, "no CUDA device")])
def test_bad_settings_are_refused_before_loading(kw, message):
    import torch

    if kw.get("device", "").startswith("cuda") and torch.cuda.is_available():
        pytest.skip("a CUDA device exists here")
    with pytest.raises(ValueError, match=message):
        TransformersBackend("smollm2", **kw)


def rubric(response: str) -> VerdictRequest:
    text = f"Problem: What is 6*7?\nResponse: {response}\nScore the response 1, 0.5 or 0."
    return VerdictRequest([{"role": "user", "content": text}], ["1", "0.5", "0"], "Score: \\boxed{")


@pytest.mark.model
def test_multi_token_choices_from_the_kv_cache_equal_full_forwards(judge_backend):
    """1 / 0.5 / 0 share a first token: later tokens are scored from the prompt's cache. Compare with one
    plain forward over each unpadded prompt + choice (log-softmax at every choice position)."""
    import torch

    b = judge_backend
    reqs = [rubric(r) for r in ("42", "The answer is 42 because 6*7=42.", "41", "I think it is 36, since 6*6.")]
    try:
        b.batch_tokens = 300  # several batches with padding
        got = b.verdict_probs(reqs)
    finally:
        b.batch_tokens = 4096
    for r, g in zip(reqs, got, strict=True):
        text = b.render(r.messages, r.assistant_prefix)
        p = b.encode(text)
        lps = []
        for c in r.choices:
            cont = continuation_tokens(b.encode, text, p, c)
            ids = torch.tensor([p + cont])
            with torch.inference_mode():
                logp = torch.log_softmax(b.model(input_ids=ids).logits.float(), -1)[0]
            lps.append(sum(logp[len(p) + t - 1, tok].item() for t, tok in enumerate(cont)))
        want = np.exp(np.array(lps) - max(lps))
        assert g.status is Status.OK
        assert len({len(continuation_tokens(b.encode, text, p, c)) for c in r.choices}) > 1  # really multi-token choices
        np.testing.assert_allclose(g.probs, want / want.sum(), atol=2e-5)


@pytest.mark.model
def test_rewardkit_calls_raise_no_deprecation_warning(judge_backend):
    """Every forward path (shared prefix + KV cache, multi-token choices from the cache, generation) with
    FutureWarning and DeprecationWarning turned into errors: rewardkit uses transformers' current cache API."""
    import warnings

    from rewardkit.backends.base import ChatRequest

    b = judge_backend
    shared = "Judge two answers to one long shared problem statement. " * 8
    reqs = [VerdictRequest([{"role": "user", "content": shared + tail}], ["1", "0.5", "0"], "Score: \\boxed{")
            for tail in ("Answer: 42.", "Answer: 41, since 6*7 is 41.")]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        warnings.simplefilter("error", DeprecationWarning)
        got = b.verdict_probs(reqs) + b.verdict_probs([rubric("42")])  # prefix path, then the plain one
        out = b.generate([ChatRequest([{"role": "user", "content": "Say yes."}], max_tokens=2)])
    assert [g.status for g in got] == [Status.OK] * 3 and out[0].status is Status.OK


@pytest.mark.model
def test_choice_tokens_found_once_per_prompt_tail_equal_the_full_encoding(judge_backend):
    """ContinuationTokens reads a choice's tokens once per prompt tail (after the last special token) and
    gives what re-encoding each whole prompt + choice gives, for every prompt and choice, merges included."""
    b = judge_backend
    calls = []

    def encode(text):
        calls.append(text)
        return b.encode(text)

    reqs = [tournament(a, p) for a in ANCHORS for p in (PROBLEM, "What is 3*7?")] + [rubric("42"), rubric("41")]
    reqs += [VerdictRequest(r.messages, r.choices, prefix) for r in reqs[:2] for prefix in ("", "Verdict:", "**")]
    texts = b.render_many([r.messages for r in reqs], [r.assistant_prefix for r in reqs])
    assert texts == [b.render(r.messages, r.assistant_prefix) for r in reqs]  # one template call, same text
    prompts = b.encode_many(texts)
    cont = type(b.continuations())(encode, b.continuations().special)
    for t, p, r in zip(texts, prompts, reqs, strict=True):
        for c in list(r.choices) + [" A", "1.0", "Tie)"]:
            assert cont(t, p, c) == continuation_tokens(b.encode, t, p, c), (r.assistant_prefix, c)
    tails = {(r.assistant_prefix, c) for r in reqs for c in list(r.choices) + [" A", "1.0", "Tie)"]}
    queries = sum(len(r.choices) + 3 for r in reqs)
    assert len(calls) <= 2 * len(tails) and 2 * len(tails) < queries  # per tail and choice, not per request
    bare = "no special token here: Answer"  # a prompt without a special token is its own tail
    assert cont(bare, b.encode(bare), " B") == continuation_tokens(b.encode, bare, b.encode(bare), " B")


@pytest.fixture(scope="module")
def gpu_choices():
    """The embedded model in fp32 on this CPU with the GPU's engine choices injected: static KV cache (rows and
    widths bucketed) and verdict chunks prepared ahead in a worker thread, one scoring pass per 300 tokens."""
    return TransformersBackend("smollm2", dtype="float32", static_cache=True, overlap=True, share_prefix=False,
                               batch_tokens=300)


@pytest.mark.model
def test_verdicts_prepared_ahead_in_chunks_equal_the_plain_path(judge_backend, gpu_choices, monkeypatch):
    b = gpu_choices
    reqs = [tournament(a, p) for p in (PROBLEM, "What is 3*7?", "Name a prime above 20.") for a in ANCHORS]
    reqs += [rubric(r) for r in ("42", "The answer is 42 because 6*7=42.", "41")]  # multi-token choices (tails)
    threads = []
    encode_many = b.encode_many
    monkeypatch.setattr(b, "encode_many", lambda texts: threads.append(threading.current_thread().name)
                        or encode_many(texts))
    got = b.verdict_probs(reqs)
    want = judge_backend.verdict_probs(reqs)
    assert len(threads) > 2 and all(t.startswith("rewardkit-prepare") for t in threads)  # chunks, off the caller
    for g, w in zip(got, want, strict=True):
        assert g.status is Status.OK and g.prompt_tokens == w.prompt_tokens
        np.testing.assert_allclose(g.probs, w.probs, atol=2e-5)
    [top] = b.top_logprobs([reqs[0]], 5)
    [ref] = judge_backend.top_logprobs([reqs[0]], 5)
    assert [t for t, _ in top.tokens] == [t for t, _ in ref.tokens]


@pytest.mark.model
def test_a_verdict_request_with_an_empty_choice_is_refused_before_the_model_runs(judge_backend, monkeypatch):
    ran = []
    monkeypatch.setattr(judge_backend, "encode_many", lambda texts: ran.append(texts))
    msg = [{"role": "user", "content": "Is 7 prime?"}]
    for choices in [(), ("YES", ""), ("YES", "YES")]:  # an IndexError, a ValueError of numpy's, a silent answer
        with pytest.raises(ValueError, match="verdict request 1: "):
            judge_backend.verdict_probs([VerdictRequest(msg, ("YES", "NO")), VerdictRequest(msg, choices)])
    assert ran == []


@pytest.mark.model
def test_static_cache_with_bucketed_rows_decodes_the_same_tokens(judge_backend, gpu_choices, monkeypatch):
    b = gpu_choices
    rows = b.encode_many(b.render_many([[{"role": "user", "content": q}] for q in
                                        ("Hi.", "List three primes above ten.", "What is 6*7? Answer briefly, please.")]))
    seen = []
    generate = b.sampler.generate
    monkeypatch.setattr(b.sampler, "generate", lambda **kw: seen.append(kw) or generate(**kw))
    got = b.sample_tokens(rows, max_new_tokens=8)
    assert got == judge_backend.sample_tokens(rows, max_new_tokens=8)  # greedy: the dynamic cache's tokens
    [kw] = seen
    # 3 rows -> 8; prompts of 32, 37 and 42 tokens -> 48, the next multiple of 8
    assert kw["cache_implementation"] == "static" and tuple(kw["input_ids"].shape) == (8, 48)


@pytest.mark.model
def test_a_split_decode_batch_runs_as_full_row_buckets(judge_backend, monkeypatch):
    """The GPU's static cache injected with a budget of 340 tokens: 20 rows of 8 (5-6 tokens padded) + 4 tokens
    fit unpadded in one batch (240) but not padded to 32 rows (384); they decode as 16 + 8 rows, not as one 20-row shape
    (which has no compiled step: a fresh compile on a GPU), and give the dynamic cache's greedy tokens."""
    b = TransformersBackend("smollm2", dtype="float32", static_cache=True, batch_tokens=85)
    assert b.placement.generation_tokens == 340
    rows = [b.encode(f"Count to {k}:") for k in range(20)]
    shapes = []
    generate = b.sampler.generate
    monkeypatch.setattr(b.sampler, "generate", lambda **kw: shapes.append(tuple(kw["input_ids"].shape))
                        or generate(**kw))
    got = b.sample_tokens(rows, max_new_tokens=4)
    assert shapes == [(16, 8), (8, 8)]
    assert got == judge_backend.sample_tokens(rows, max_new_tokens=4)

@pytest.mark.model
def test_sampling_without_top_k_draws_from_the_whole_distribution(judge_backend):
    rows = judge_backend.encode_many(judge_backend.render_many([[{"role": "user", "content": "Say something."}]] * 4))

    def draw(top_k):
        return judge_backend.sample_tokens(rows, max_new_tokens=24, temperature=4.0, top_k=top_k, seed=11)

    unset = draw(None)
    assert unset == draw(0)  # no top-k filter, not transformers' default top_k=50
    assert unset != draw(50)


@pytest.mark.model
def test_a_float32_model_samples_from_a_bf16_copy_refreshed_in_place(monkeypatch):
    import copy

    import torch

    from rewardkit.grpo.samplers import TransformersSampler

    copies = []  # copies of a model's weights (transformers deep-copies its generation configs too)
    deepcopy = copy.deepcopy
    monkeypatch.setattr(copy, "deepcopy", lambda x, *a: (isinstance(x, torch.nn.Module) and copies.append(x))
                        or deepcopy(x, *a))
    b = TransformersBackend("smollm2", dtype="float32", sample_dtype="bfloat16")
    assert copies == []  # not at load: a vLLM sampler set up next sizes its memory without the copy on the device
    b.sample_tokens([b.encode("Hi")], max_new_tokens=1)  # the copy is made here, inside the decode's inference mode
    assert b.sampler is not b.model and next(b.sampler.parameters()).dtype == torch.bfloat16
    assert len(copies) == 1
    before = [p.data_ptr() for p in b.sampler.parameters()]
    with torch.no_grad():
        for p in b.model.parameters():
            p.mul_(1.01)  # an optimizer step
    TransformersSampler(b).sync(b.model)  # what the GRPO learner calls after its optimizer steps
    assert [p.data_ptr() for p in b.sampler.parameters()] == before  # in place: a compiled step keeps its inputs
    for s, m in zip(b.sampler.parameters(), b.model.parameters(), strict=True):
        assert torch.equal(s, m.to(torch.bfloat16))
    [(toks, _)] = b.sample_tokens([b.encode("Hello")], max_new_tokens=3, min_new_tokens=3)
    assert len(toks) == 3
    other = TransformersBackend("smollm2", dtype="float32", sample_dtype="bfloat16")
    other.drop_sampling_copy()  # another engine samples (the trainer with a vLLM sampler)
    other.sample_tokens([b.encode("Hello")], max_new_tokens=2)
    assert len(copies) == 1 and other.sampler is other.model
