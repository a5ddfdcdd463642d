"""One batched LLM interface for every judge-based scorer.

Two calls: ``generate`` (chat requests in, completions with token counts out) and ``verdict_probs``
(prompts plus a fixed set of verdict continuations in, normalised probabilities out, one forward pass per
prompt). Every result carries a Status: a backend never raises for one bad request and never invents a
verdict.
"""

from __future__ import annotations

import functools
import math
import typing
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from rewardkit.options import Options
from rewardkit.types import Cost, Status, one_per_item

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": str}

DType = Literal["auto", "float32", "bfloat16", "float16"]  # a local model's weights; auto: bf16 where the hardware has it
DTYPES: tuple[str, ...] = typing.get_args(DType)


@dataclass
class ChatRequest:
    """One chat completion request; ``n`` samples share the prompt."""

    messages: list[Message]
    max_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    n: int = 1
    seed: int | None = None
    stop: list[str] | None = None
    min_tokens: int = 0  # suppress end-of-sequence before this many new tokens (vLLM's min_tokens)


@dataclass
class Completion:
    """The ``n`` texts for one ChatRequest (empty with a non-ok status on failure)."""

    texts: list[str]
    status: Status = Status.OK
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reasons: list[str] = field(default_factory=list)
    error: str | None = None
    cached: bool = False

    @property
    def text(self) -> str:
        return self.texts[0] if self.texts else ""

    def finish_reason(self, i: int = 0) -> str | None:
        """Why sample ``i`` stopped ("stop", "length", ...); None when the backend did not say."""
        return self.finish_reasons[i] if i < len(self.finish_reasons) and self.finish_reasons[i] else None


@dataclass
class VerdictRequest:
    """Score fixed continuations after a chat prompt, e.g. choices ("A", "B", "Tie") after ``\\boxed{``.

    The assistant turn starts with ``assistant_prefix``; each choice is scored by the log-probability of
    its tokens after that prefix, and the probabilities are renormalised over the choices.
    """

    messages: list[Message]
    choices: Sequence[str]
    assistant_prefix: str = ""


@dataclass
class VerdictResult:
    probs: np.ndarray  # shape [len(choices)], sums to 1 (empty on failure)
    status: Status = Status.OK
    prompt_tokens: int = 0
    error: str | None = None
    cached: bool = False

    def best(self) -> int:
        return int(np.argmax(self.probs))


@dataclass
class TopLogprobs:
    """The most likely next tokens after one prompt: ``(token text, log-probability)``, best first."""

    tokens: list[tuple[str, float]]
    status: Status = Status.OK
    prompt_tokens: int = 0
    error: str | None = None
    cached: bool = False  # from the judge cache: no model call (``cost_of`` counts it as a hit)


@dataclass
class TokenScoreRequest:
    """Score an existing ``response`` as the assistant's reply to chat ``messages`` (no generation)."""

    messages: list[Message]
    response: str


@dataclass
class TokenScores:
    """Per response token t: log p(y_t), the entropy H(p_t) and KL(U || p_t) of the model's full next-token
    distribution p_t at that position (the self-certainty / entropy baselines' inputs), and where the token
    stands in the response (``offsets[t] = (start, end)`` characters; None when the tokenizer cannot say);
    empty on failure."""

    logprobs: np.ndarray
    entropy: np.ndarray
    kl_uniform: np.ndarray
    status: Status = Status.OK
    prompt_tokens: int = 0
    vocab_size: int = 0
    error: str | None = None
    cached: bool = False
    offsets: np.ndarray | None = None  # [T, 2] character spans of the response tokens in the response


def distribution_stats(logp: Any) -> tuple[Any, Any]:
    """Entropy H(p) = -sum_j p_j log p_j and KL(U || p) = -log V - (1/V) sum_j log p_j of each row of
    next-token log-probabilities ``logp`` [T, V] (both 0 <= . ; uniform p: H = log V, KL = 0), in float64;
    a torch tensor is reduced where it lives (no [T, V] copy to the host), anything else as a numpy array."""
    if hasattr(logp, "double"):  # torch
        logp = logp.double()
        entropy = -(logp.exp() * logp).sum(-1)
    else:
        logp = np.asarray(logp, dtype=np.float64)
        entropy = -(np.exp(logp) * logp).sum(-1)
    v = logp.shape[-1]
    kl_uniform = -math.log(v) - logp.mean(-1)
    return entropy, kl_uniform


def choice_probs(logp: np.ndarray) -> np.ndarray:
    """The choices' log-probabilities renormalised over the choices (a softmax; verdict_probs' result)."""
    p = np.exp(logp - logp.max())
    return p / p.sum()


def choice_result(logp: np.ndarray, prompt_tokens: int) -> VerdictResult:
    """``choice_probs`` as every backend's verdict: an ERROR, not NaN probabilities with an OK status, when a
    choice's log-probability is NaN or +inf or none is finite (a model whose logits overflowed)."""
    logp = np.asarray(logp, dtype=np.float64)
    if np.isfinite(logp).any() and not (np.isnan(logp) | np.isposinf(logp)).any():
        return VerdictResult(choice_probs(logp), Status.OK, prompt_tokens)
    return VerdictResult(np.array([]), Status.ERROR, prompt_tokens,
                         error=f"the choices' log-probabilities {logp.tolist()} are not finite")


def continuation_tokens(encode, text: str, prompt_ids: list[int], choice: str) -> list[int]:
    """The tokens ``choice`` adds after the prompt ``text`` (token ids ``prompt_ids``), as the model reads it;
    when tokenisation merges across the boundary, the choice tokenised alone."""
    full = encode(text + choice)
    if full[: len(prompt_ids)] == prompt_ids and len(full) > len(prompt_ids):
        return full[len(prompt_ids):]
    return encode(choice)


def check_choices(requests: Sequence[VerdictRequest]) -> None:
    """ValueError naming the request when a verdict request has no choices, an empty choice or one choice twice:
    no probability can be read for those (a caller's bug, refused before any model call, not a judge failure)."""
    for i, r in enumerate(requests):
        choices = list(r.choices)
        if not choices:
            raise ValueError(f"verdict request {i}: no choices to score")
        if any(not isinstance(c, str) or not c for c in choices):
            raise ValueError(f"verdict request {i}: every choice must be a non-empty string, got {choices!r}")
        if len(set(choices)) != len(choices):
            raise ValueError(f"verdict request {i}: a choice given twice in {choices!r}")


def first_tokens_decide(conts: Sequence[Sequence[int]]) -> bool:
    """Whether the choices' first tokens all differ, so P(choice) is read from the first token alone (A/B/Tie,
    YES/NO); otherwise (1 / 0.5 / 0) each choice's later tokens are scored too. Every backend's verdict_probs
    and GAR's expected variant read a choice's probability by this one rule."""
    return len({c[0] for c in conts}) == len(conts)


class ContinuationTokens:
    """``continuation_tokens`` computed once per (prompt tail, choice) instead of once per prompt and choice.

    A tokenizer splits its text at its added (special) tokens before anything else, so what ``choice`` adds after a prompt
    depends only on the prompt's tokens after its last special token (``<|im_start|>assistant\n`` plus the
    assistant prefix in a chat prompt): every prompt of a batch shares that tail, and the whole prompt is
    re-encoded once per choice for the batch, not once per request. A prompt without a special token is its
    own tail (the exact computation, uncached in effect).
    """

    def __init__(self, encode, special_ids: Sequence[int]):
        self.encode, self.special = encode, frozenset(special_ids)
        self.known: dict[tuple[tuple[int, ...], str], list[int]] = {}

    def __call__(self, text: str, prompt_ids: list[int], choice: str) -> list[int]:
        cut = next((k for k in range(len(prompt_ids) - 1, -1, -1) if prompt_ids[k] in self.special), -1)
        key = (tuple(prompt_ids[cut + 1:]) if cut >= 0 else tuple(prompt_ids), choice)
        if key not in self.known:
            self.known[key] = continuation_tokens(self.encode, text, prompt_ids, choice)
        return self.known[key]


# a list of requests in, one result per request out
_BATCHED = ("generate", "verdict_probs", "score_tokens", "top_logprobs")


def _one_per_request(f: typing.Callable, name: str) -> typing.Callable:
    """``f`` (a backend's batched call) with its answer checked by ``types.one_per_item``: a RuntimeError naming
    the backend and the call when it returns another number of results than it was given requests."""
    @functools.wraps(f)
    def checked(self: JudgeBackend, requests: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
        return one_per_item(f(self, requests, *args, **kwargs), requests,
                            f"judge backend {type(self).__name__}.{name}", of="requests")

    checked.__one_per_request__ = True  # type: ignore[attr-defined]
    return checked


class JudgeBackend(ABC):
    """Base class of the transformers / vLLM / HTTP / llama.cpp backends.

    A backend declares its options once, as a frozen ``Options`` dataclass (``rewardkit.options``): the
    constructor takes them as keywords, and judge specs (``smollm2?dtype=bfloat16``) are typed from them.
    """

    Options: typing.ClassVar[type[Options]] = Options  # each backend sets its own
    #: extra spec options not in ``Options`` are passed through with guessed types (vLLM engine arguments)
    open_options: typing.ClassVar[bool] = False
    #: identifies the model for caching (path or hub id plus dtype/quantisation where it matters)
    model_id: str = ""
    #: the verdict mode a scorer uses with this judge when its ``mode`` option is ``auto``
    default_mode: str = "generate"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every backend's batched calls answer one result per request, in order: checked here, once, for the
        backends rewardkit ships and any a user writes, so no caller pairs a result with another request."""
        super().__init_subclass__(**kwargs)
        for name in _BATCHED:
            f = cls.__dict__.get(name)
            if callable(f) and not getattr(f, "__one_per_request__", False):
                setattr(cls, name, _one_per_request(f, name))

    @abstractmethod
    def generate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        """Complete every request; one result per request, in order."""

    @abstractmethod
    def verdict_probs(self, requests: Sequence[VerdictRequest]) -> list[VerdictResult]:
        """Probabilities of each request's choices, one forward pass per prompt."""

    def cache_identity(self) -> str:
        """What determines this backend's answers besides the request (the judge cache keys on it)."""
        return self.model_id

    def describe(self) -> str:
        """One line for people: the model, and for a local one where and how it runs (``rewardkit score`` prints
        it once)."""
        return self.model_id

    def served_name(self) -> str:
        """The model name ``serve-judge`` shows for this backend (``/v1/models`` id and root): never a URL."""
        return self.model_id

    @classmethod
    def locate(cls, model: str) -> None:
        """Raise ``ValueError`` when ``model`` cannot be found, without loading it (``check_judge(load=False)``:
        a job whose judge loads elsewhere, on Ray workers). Default: nothing to check."""
        return None

    def check(self) -> None:
        """Raise ``ValueError`` when this loaded backend cannot answer (``check_judge``, before the first group).
        A local model that loaded can; a server is asked (``HTTPBackend``)."""
        return None

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Token counts with this model's tokenizer; whitespace words for a backend without one (an OpenAI-style
        server exposes none). Budgets the judges' inputs: GAR's slice length L, the rollout judge's response."""
        return whitespace_tokens(texts)

    def context_length(self) -> int | None:
        """The judge's context in tokens (prompt and generation together), None when the backend does not
        know it (a server: an over-long request then fails with its own error). Where the rollout judge cuts."""
        return None

    def top_logprobs(self, requests: Sequence[VerdictRequest], k: int = 20) -> list[TopLogprobs]:
        """The ``k`` most likely next tokens after each prompt (+ assistant prefix); serve-judge uses it."""
        raise NotImplementedError(f"{type(self).__name__} does not expose next-token log-probabilities")

    def score_tokens(self, requests: Sequence[TokenScoreRequest]) -> list[TokenScores]:
        """Full-vocabulary statistics of the model's distribution at every response token (one forward pass
        over prompt + response); backends without full distributions raise."""
        raise NotImplementedError(
            f"{type(self).__name__} cannot score response tokens: the self-certainty and entropy scorers need the "
            "full next-token distribution at every response position; use the transformers backend (e.g. judge=smollm2 "
            "or transformers:<model>) or vllm:<model>")

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release model memory, processes or connections."""


class HFChatTemplateMixin:
    """Prompt rendering and token counting for backends that hold a Hugging Face tokenizer (``self.tokenizer``)."""

    tokenizer: Any

    def render(self, messages: Sequence[Message], assistant_prefix: str = "") -> str:
        """The chat-templated prompt text, ending where the assistant's reply starts (plus a prefix)."""
        text = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
        return text + assistant_prefix

    def render_many(self, chats: Sequence[Sequence[Message]], prefixes: Sequence[str] | None = None) -> list[str]:
        """``render`` for a batch: one chat-template call for every conversation."""
        if not chats:
            return []
        texts = self.tokenizer.apply_chat_template([list(m) for m in chats], add_generation_prompt=True,
                                                   tokenize=False)
        return [t + p for t, p in zip(texts, [""] * len(texts) if prefixes is None else prefixes, strict=True)]

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False).input_ids

    def encode_many(self, texts: Sequence[str]) -> list[list[int]]:
        """``encode`` for a batch: one tokenizer call (the fast tokenizer encodes the rows in parallel)."""
        return self.tokenizer(list(texts), add_special_tokens=False).input_ids if texts else []

    def continuations(self) -> ContinuationTokens:
        """A ``ContinuationTokens`` for one batch of verdict requests, keyed at this tokenizer's special tokens."""
        tok = self.tokenizer
        return ContinuationTokens(self.encode, set(tok.all_special_ids) | set(getattr(tok, "added_tokens_decoder", {})))

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(ids) for ids in self.tokenizer(list(texts), add_special_tokens=False).input_ids]

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]] | None]:
        """Token ids of ``text`` and each token's character span (fast tokenizers; None from slow ones)."""
        if not getattr(self.tokenizer, "is_fast", False):
            return self.encode(text), None
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return enc.input_ids, [tuple(o) for o in enc.offset_mapping]


def response_offsets(offsets: list[tuple[int, int]] | None, n: int, prompt_chars: int) -> np.ndarray | None:
    """The ``[n, 2]`` character spans, within the response, of the last ``n`` tokens of prompt + response
    (``offsets`` from ``encode_with_offsets``); a token merged across the boundary starts at 0. Every backend's
    ``score_tokens`` reports these, so answer-token spans are the same whichever backend scored them."""
    if offsets is None:
        return None
    last = offsets[len(offsets) - n:]  # not offsets[-n:]: n = 0 would take them all
    return np.clip(np.asarray(last, dtype=np.int64).reshape(n, 2) - prompt_chars, 0, None)


def whitespace_tokens(texts: Sequence[str]) -> list[int]:
    """Whitespace word counts: a tokenizer-free stand-in for tests and for backends without a tokenizer."""
    return [len(t.split()) for t in texts]



def cost_of(results: Sequence[Completion | VerdictResult | TopLogprobs]) -> Cost:
    """Aggregate the cost of a batch of backend results; a cache hit costs no call and no tokens."""
    c = Cost()
    for r in results:
        if r.cached:
            c.cache_hits += 1
            continue
        c.judge_calls += 1
        c.prompt_tokens += r.prompt_tokens
        c.completion_tokens += getattr(r, "completion_tokens", 0)
    return c
