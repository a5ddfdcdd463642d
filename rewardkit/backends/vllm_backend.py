"""vLLM backend (GPU, optional extra ``rewardkit[vllm]``): an offline ``vllm.LLM`` engine with prefix caching.

vLLM is imported only when this backend is chosen (``load_backend("vllm:MODEL")``). The engine schedules
the whole batch itself (continuous batching), and automatic prefix caching re-uses the KV blocks of
shared prompt prefixes (the problem + new trace of a live tournament) without any help from us.

``verdict_probs``: when the choices differ in their first token, one step with ``logprobs=top_logprobs``
reads each choice's first-token log-probability (exact when it is in the top list, 0 otherwise - raise
``top_logprobs`` for near-certain judges); choices sharing a first token are scored in full with
``prompt_logprobs`` over prompt + continuation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from rewardkit.backends.base import (
    ChatRequest,
    Completion,
    DType,
    HFChatTemplateMixin,
    JudgeBackend,
    VerdictRequest,
    VerdictResult,
)
from rewardkit.options import Options, option
from rewardkit.types import Status

INSTALL_HINT = ("the vLLM backend needs the optional extra: pip install 'rewardkit[vllm]' (vLLM needs a CUDA "
                "GPU); on CPU use 'smollm2' or a model directory (transformers), or an http:// judge server")


def _import_vllm():
    try:
        import vllm
    except ImportError as e:
        raise ImportError(f"{INSTALL_HINT} ({e})") from e
    return vllm


@dataclass(frozen=True)
class VLLMOptions(Options):
    """The vLLM backend's options; other keywords (and spec options) go to ``vllm.LLM`` as engine arguments."""

    dtype: DType = option("auto", "weights' dtype: auto, float32, bfloat16 or float16")
    gpu_memory_utilization: float = option(0.85, "fraction of GPU memory for weights + KV cache")
    max_model_len: int | None = option(None, "context length (default: the model's)")
    enable_prefix_caching: bool = option(True, "re-use KV blocks of shared prompt prefixes")
    tensor_parallel_size: int = option(1, "GPUs per model")
    top_logprobs: int = option(20, "alternatives read per verdict step")
    seed: int = option(0, "engine seed")


class VLLMBackend(HFChatTemplateMixin, JudgeBackend):
    """An offline vLLM engine for ``model`` (hub id or local directory); the other keywords are
    ``VLLMOptions``, and any further ones vLLM engine arguments."""

    Options = VLLMOptions
    open_options = True

    def __init__(self, model: str, **options: Any):
        known = {f.name for f in fields(VLLMOptions)}
        o = self.options = VLLMOptions(**{k: v for k, v in options.items() if k in known})
        engine_kwargs = {k: v for k, v in options.items() if k not in known}
        dtype, gpu_memory_utilization, max_model_len = o.dtype, o.gpu_memory_utilization, o.max_model_len
        enable_prefix_caching, tensor_parallel_size, top_logprobs, seed = (
            o.enable_prefix_caching, o.tensor_parallel_size, o.top_logprobs, o.seed)
        vllm = _import_vllm()
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError(f"vllm:{model}: no CUDA GPU is visible (torch.cuda.is_available() is False); "
                               + INSTALL_HINT.split("; ", 1)[1])
        if model in ("smollm2", "embedded"):
            from rewardkit.backends.embedded import embedded_model_path

            model = str(embedded_model_path())
        self.vllm = vllm
        self.llm = vllm.LLM(model=model, dtype=dtype, gpu_memory_utilization=gpu_memory_utilization,
                            max_model_len=max_model_len, enable_prefix_caching=enable_prefix_caching,
                            tensor_parallel_size=tensor_parallel_size, seed=seed, **engine_kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self.top_k = top_logprobs
        self.model_id = f"{model}@vllm-{dtype}"

    def generate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        sp = self.vllm.SamplingParams
        prompts = [{"prompt_token_ids": self.encode(self.render(r.messages))} for r in requests]
        params = [sp(n=r.n, temperature=r.temperature, top_p=r.top_p, max_tokens=r.max_tokens, seed=r.seed,
                     stop=r.stop, min_tokens=r.min_tokens) for r in requests]
        try:
            outs = self.llm.generate(prompts, params, use_tqdm=False)
        except Exception as e:  # e.g. a prompt longer than max_model_len fails the batch: retry one by one
            if len(requests) == 1:
                return [Completion([], Status.ERROR, len(prompts[0]["prompt_token_ids"]), error=f"vllm: {e}")]
            return [self.generate([r])[0] for r in requests]
        return [Completion([o.text for o in out.outputs], Status.OK, len(out.prompt_token_ids),
                           sum(len(o.token_ids) for o in out.outputs), [o.finish_reason or "" for o in out.outputs])
                for out in outs]

    def verdict_probs(self, requests: Sequence[VerdictRequest]) -> list[VerdictResult]:
        sp = self.vllm.SamplingParams
        out: list[VerdictResult | None] = [None] * len(requests)
        prompts, conts = [], []
        for r in requests:
            text = self.render(r.messages, r.assistant_prefix)
            p = self.encode(text)
            prompts.append(p)
            conts.append([_continuation(self.encode, text, p, c) for c in r.choices])
        first = [i for i in range(len(requests)) if len({c[0] for c in conts[i]}) == len(conts[i])]
        full = [i for i in range(len(requests)) if i not in set(first)]
        if first:
            res = self.llm.generate([{"prompt_token_ids": prompts[i]} for i in first],
                                    sp(max_tokens=1, temperature=0.0, logprobs=self.top_k), use_tqdm=False)
            for i, o in zip(first, res, strict=True):
                top = o.outputs[0].logprobs[0]  # {token id: Logprob}
                lp = np.array([top[c[0]].logprob if c[0] in top else -np.inf for c in conts[i]])
                if not np.isfinite(lp).any():
                    out[i] = VerdictResult(np.array([]), Status.ERROR, len(prompts[i]),
                                           error=f"vllm: no choice among the top {self.top_k} next tokens")
                else:
                    out[i] = VerdictResult(_normalise(lp), Status.OK, len(prompts[i]))
        if full:
            items = [(i, j) for i in full for j in range(len(conts[i]))]
            res = self.llm.generate([{"prompt_token_ids": prompts[i] + conts[i][j]} for i, j in items],
                                    sp(max_tokens=1, temperature=0.0, prompt_logprobs=0), use_tqdm=False)
            scores = {}
            for (i, j), o in zip(items, res, strict=True):
                n = len(prompts[i])
                scores[(i, j)] = sum(o.prompt_logprobs[n + t][tok].logprob for t, tok in enumerate(conts[i][j]))
            for i in full:
                lp = np.array([scores[(i, j)] for j in range(len(conts[i]))])
                out[i] = VerdictResult(_normalise(lp), Status.OK, len(prompts[i]))
        return out  # type: ignore[return-value]

    def close(self) -> None:
        del self.llm


def _continuation(encode, text: str, prompt_ids: list[int], choice: str) -> list[int]:
    ids = encode(text + choice)
    if ids[: len(prompt_ids)] == prompt_ids and len(ids) > len(prompt_ids):
        return ids[len(prompt_ids):]
    return encode(choice)


def _normalise(logp: np.ndarray) -> np.ndarray:
    p = np.exp(logp - logp[np.isfinite(logp)].max())
    return p / p.sum()
