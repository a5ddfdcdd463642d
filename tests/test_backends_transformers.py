"""transformers backend: padding invariance, shared-prefix KV reuse, top log-probs, dtype selection."""

from __future__ import annotations

import numpy as np
import pytest

from rewardkit.backends import ChatRequest, VerdictRequest, load_backend, parse_spec
from rewardkit.backends.transformers_backend import cpu_supports_bf16, resolve_dtype
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
    assert parse_spec("http://h:1/v1#model=a/b") == ("http", {"base_url": "http://h:1/v1", "model": "a/b"})
    assert parse_spec("openai:a@b@https://h/v1") == ("http", {"base_url": "https://h/v1", "model": "a@b"})
    for bad in ("", "http://h/v1#foo=1", "openai:name", "vllm:", "llamacpp:"):
        with pytest.raises(ValueError, match="spec"):
            parse_spec(bad)


def test_dtype_auto_follows_cpu_flags():
    assert resolve_dtype("auto", "cpu") == ("bfloat16" if cpu_supports_bf16() else "float32")
    assert resolve_dtype("float16", "cpu") == "float16"


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
