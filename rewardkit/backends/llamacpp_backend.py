"""llama.cpp backend (CPU, optional extra ``rewardkit[llamacpp]``): loads a GGUF file directly.

Fast decoding at batch 1 on CPU (SmolLM2-135M: ~100 tokens/s here vs ~10 with transformers), slower
prefill; requests run one after another. Verdict scoring evaluates the chat-templated prompt and reads
the next-token logits; consecutive prompts re-use the KV cache of their common token prefix (the same
trick llama-cpp-python's own ``generate`` uses), so a live tournament's anchors cost only their tokens.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rewardkit.backends.base import (
    ChatRequest,
    Completion,
    JudgeBackend,
    VerdictRequest,
    VerdictResult,
    check_choices,
    choice_result,
    continuation_tokens,
    first_tokens_decide,
)
from rewardkit.backends.spec import redact
from rewardkit.options import Options, option
from rewardkit.types import Status

INSTALL_HINT = ("the llama.cpp backend needs llama-cpp-python: pip install 'rewardkit[llamacpp]' "
                "(it compiles llama.cpp from source, several minutes)")


class _MinTokens:
    """Logits processor: no end-of-sequence before ``n`` new tokens (ChatRequest.min_tokens)."""

    def __init__(self, n: int, eos: int):
        self.n, self.eos, self.start = n, eos, None

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        if self.start is None:  # first call: everything so far is the prompt
            self.start = len(input_ids)
        if len(input_ids) - self.start < self.n:
            scores[self.eos] = -np.inf
        return scores


@dataclass(frozen=True)
class LlamaCppOptions(Options):
    """The llama.cpp backend's options (keywords of ``LlamaCppBackend``, or ``llamacpp:X.gguf?n_ctx=4096``)."""

    n_ctx: int = option(8192, "context length")
    n_threads: int | None = option(None, "CPU threads (default: all)")
    seed: int = option(0, "sampling seed")

    def __post_init__(self) -> None:
        super().__post_init__()
        self._at_least(1, "n_ctx", "n_threads")


class LlamaCppBackend(JudgeBackend):
    """A GGUF model through llama-cpp-python: ``model`` is a .gguf path ("smollm2" = the embedded
    SmolLM2-135M-Instruct GGUF); the other keywords are ``LlamaCppOptions``."""

    Options = LlamaCppOptions

    def __init__(self, model: str, **options: Any):
        o = self.options = LlamaCppOptions(**options)
        n_ctx, n_threads, seed = o.n_ctx, o.n_threads, o.seed
        try:
            from llama_cpp import Llama, LogitsProcessorList
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        except ImportError as e:
            raise ImportError(f"{INSTALL_HINT} ({e})") from e
        from rewardkit.backends.embedded import ALIASES, GGUF_FILE, gguf_dir

        self.default_mode = "logit" if model in ALIASES else "generate"  # as scoring.resolve_mode reads the spec
        if model in ALIASES:
            model = str(gguf_dir() / GGUF_FILE)
        if not os.path.exists(model):
            raise FileNotFoundError(f"llamacpp:{redact(model)}: no such GGUF file")
        self._processors = LogitsProcessorList
        self.llm = Llama(model_path=model, n_ctx=n_ctx, n_threads=n_threads or os.cpu_count(), seed=seed,
                         verbose=False)
        template = self.llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise ValueError(f"llamacpp:{redact(model)}: the GGUF file has no chat template")
        tok = self.llm.detokenize
        self.formatter = Jinja2ChatFormatter(template, eos_token=tok([self.llm.token_eos()]).decode(),
                                             bos_token=tok([self.llm.token_bos()]).decode())
        self.model_id = f"{os.path.basename(model)}@llamacpp"

    def render(self, messages: Sequence[dict[str, str]], assistant_prefix: str = "") -> str:
        return self.formatter(messages=list(messages)).prompt + assistant_prefix

    def encode(self, text: str) -> list[int]:
        return self.llm.tokenize(text.encode(), add_bos=False, special=True)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(self.encode(t)) for t in texts]

    def context_length(self) -> int | None:
        return self.llm.n_ctx()

    def generate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        out = []
        for r in requests:
            texts, reasons, ptoks, ctoks = [], [], 0, 0
            try:
                for s in range(r.n):
                    procs = self._processors([_MinTokens(r.min_tokens, self.llm.token_eos())]) if r.min_tokens else None
                    res = self.llm.create_chat_completion(
                        messages=list(r.messages), max_tokens=r.max_tokens, temperature=r.temperature,
                        top_p=r.top_p, seed=None if r.seed is None else r.seed + s, stop=r.stop or [],
                        logits_processor=procs)
                    texts.append(res["choices"][0]["message"]["content"] or "")
                    reasons.append(res["choices"][0].get("finish_reason") or "")
                    ptoks = res["usage"]["prompt_tokens"]
                    ctoks += res["usage"]["completion_tokens"]
            except ValueError as e:  # llama-cpp-python raises ValueError for prompts beyond n_ctx
                out.append(Completion([], Status.ERROR, error=f"llamacpp: {e}"))
                continue
            out.append(Completion(texts, Status.OK, ptoks, ctoks, reasons))
        return out

    def _next_logprobs(self, tokens: list[int]) -> np.ndarray:
        """Log-softmax of the next-token logits after ``tokens``, re-using the cached common prefix."""
        llm = self.llm
        cached = list(llm.input_ids)
        keep = 0
        while keep < min(len(cached), len(tokens) - 1) and cached[keep] == tokens[keep]:
            keep += 1
        if keep:
            llm.n_tokens = keep  # eval() drops the KV cache beyond n_tokens before appending
        else:
            llm.reset()
        llm.eval(tokens[keep:])
        # Llama.eval keeps no logits unless logits_all=True (llama-cpp-python 0.3.x samples inside its
        # sampler), so read the last position's row from the context directly.
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).astype(np.float64)
        logits -= logits.max()
        return logits - np.log(np.exp(logits).sum())

    def verdict_probs(self, requests: Sequence[VerdictRequest]) -> list[VerdictResult]:
        check_choices(requests)
        order = sorted(range(len(requests)), key=lambda i: self.encode(self.render(requests[i].messages)))
        res: dict[int, VerdictResult] = {}
        for i in order:  # sorted token lists put shared prefixes next to each other
            r = requests[i]
            text = self.render(r.messages, r.assistant_prefix)
            p = self.encode(text)
            if len(p) + 8 >= self.llm.n_ctx():
                res[i] = VerdictResult(np.array([]), Status.ERROR, len(p),
                                       error=f"prompt has {len(p)} tokens; n_ctx is {self.llm.n_ctx()}")
                continue
            conts = [continuation_tokens(self.encode, text, p, c) for c in r.choices]
            lp0 = self._next_logprobs(p)
            if first_tokens_decide(conts):
                lp = np.array([lp0[c[0]] for c in conts])
            else:  # choices share a first token: score each continuation token by token
                lp = np.array([lp0[c[0]] + sum(self._next_logprobs(p + c[:t])[c[t]] for t in range(1, len(c)))
                               for c in conts])
            res[i] = choice_result(lp, len(p))
        return [res[i] for i in range(len(requests))]

    def close(self) -> None:
        self.llm.close()
