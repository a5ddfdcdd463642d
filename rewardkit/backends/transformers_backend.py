"""transformers backend (CPU and GPU): padding-aware batched generation and verdict-logit scoring.

Where it runs and how big its batches are follows the hardware (``rewardkit.backends.hardware.place``).
Requests are sorted by prompt length and packed into batches under a token budget (``batch_tokens``:
rows x padded width, so a batch of long prompts holds fewer rows than one of short prompts); left padding
with explicit position ids keeps padded rows numerically identical to unpadded ones. Attention is
PyTorch's scaled-dot-product kernel (``sdpa``), and only the logits that are read are computed: one
position per prompt, plus the few positions of multi-token verdict choices, which continue from the
prompt's KV cache instead of re-encoding the prompt once per choice. Verdict requests that share a long
token prefix (a live tournament: problem + new trace, then three anchors) encode that prefix once and
score only the suffixes against its KV cache (on a CPU; on a GPU one big batch wins). No per-request work on
the hot path: a batch is rendered and tokenised in one call, the choices' tokens are found once per prompt
tail, and what is read goes to the host in one transfer per call. On a GPU (``Placement.overlap``) verdict
requests are prepared in chunks by a worker thread while the device runs the previous chunk, inputs go to the
device from pinned memory without waiting, and the attention mask is built on the device, so nothing in a batch
waits for the device; generation decodes with transformers' static KV cache and compiled decode step
(``Placement.static_cache``), batches padded to a few shapes so the compile is paid once per shape.
"""

from __future__ import annotations

import copy
import inspect
import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any

import numpy as np

from rewardkit.backends.base import (
    ChatRequest,
    Completion,
    DType,
    HFChatTemplateMixin,
    JudgeBackend,
    TokenScoreRequest,
    TokenScores,
    TopLogprobs,
    VerdictRequest,
    VerdictResult,
    check_choices,
    choice_result,
    distribution_stats,
    first_tokens_decide,
    response_offsets,
)
from rewardkit.backends.hardware import place, resolve_device, resolve_dtype, resolve_threads
from rewardkit.backends.spec import redact
from rewardkit.options import Options, option
from rewardkit.types import Status


@dataclass(frozen=True)
class TransformersOptions(Options):
    """The transformers backend's options (keywords of ``TransformersBackend``, or ``smollm2?dtype=...``);
    ``auto`` and None follow the hardware (``rewardkit.backends.hardware.place``)."""

    dtype: DType = option("auto", "float32, bfloat16, float16 or auto (bf16 on a GPU and on a CPU that supports it)")
    device: str = option("auto", "torch device: auto (cuda when torch sees a GPU, else cpu), cpu, cuda, cuda:1")
    batch_tokens: int | None = option(None, "token budget per scoring forward pass (rows x padded width); None: "
                                            "4,096 on a CPU, from the model's size and the free memory on a GPU")
    batch_size: int | None = option(None, "cap on rows per forward pass (None: the token budgets decide; "
                                          "1,024 on a GPU)")
    max_prompt_tokens: int | None = option(None, "longest prompt accepted (None: the model's context length)")
    share_prefix: bool | None = option(None, "encode a token prefix shared by several verdict requests once "
                                             "(KV cache); None: on a CPU only, where it pays")
    min_shared_prefix: int = option(64, "shortest shared prefix (tokens) worth re-using")
    memory_fraction: float = option(0.4, "share of the GPU's free memory (at load) that one batch's "
                                         "activations or KV cache may take")
    num_threads: int | None = option(None, "torch CPU threads (process-wide; default $REWARDKIT_TORCH_THREADS, "
                                           "$OMP_NUM_THREADS, else the idle cores: default_threads)")
    static_cache: bool | None = option(None, "decode with transformers' static KV cache and compiled decode step "
                                             "(None: on a GPU)")
    overlap: bool | None = option(None, "prepare the next chunk of verdict requests while the device runs this one "
                                        "(None: on a GPU)")
    sample_dtype: str | None = option(None, "decode from a copy of the weights in this dtype (auto: bfloat16 for a "
                                            "float32 model on a GPU; None: the weights themselves)")

    def __post_init__(self) -> None:
        super().__post_init__()
        self._at_least(1, "batch_tokens", "batch_size")
        if not 0 < self.memory_fraction <= 1:
            raise ValueError(f"option 'memory_fraction': must be in (0, 1], got {self.memory_fraction}")


def local_model_path(model: str) -> str:
    """The folder to load ``model`` from: a local model folder, or a hub id's snapshot already in the local
    Hugging Face cache. Nothing is downloaded (``HF_HUB_OFFLINE``-style): a name that is neither is a
    ``ValueError`` at once, where transformers would spend its hub retries (46 s here) and then fail."""
    p = Path(model).expanduser()
    shown = redact(model)
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise ValueError(f"judge {shown!r}: the folder has no config.json (not a transformers model folder)")
        return str(p)
    if p.exists():
        raise ValueError(f"judge {shown!r}: a file, not a model folder (a GGUF file is 'llamacpp:{shown}')")
    from huggingface_hub import snapshot_download

    try:  # a hub id downloaded earlier (the cache under $HF_HOME)
        return snapshot_download(model, local_files_only=True)
    except Exception:  # not cached, or not a valid hub id (huggingface_hub raises several kinds)
        fetch = f": `hf download {model}`" if re.fullmatch(r"[\w.-]+(/[\w.-]+)?", model) else ""  # a hub id only
        raise ValueError(
            f"judge {shown!r}: no such model folder, and no hub model of that name in the local Hugging Face "
            "cache; rewardkit loads judges from disk only (pass a folder, 'smollm2' for the embedded model, a "
            f"server URL http(s)://HOST[:PORT]/v1, or download the model first{fetch})") from None


def _cache_kwarg(model) -> str:
    """The forward() keyword for a KV cache: ``cache`` in current transformers (``past_key_values`` is deprecated
    there and goes in 5.40), ``past_key_values`` in the 5.x releases before the rename."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _cache_of(out) -> object | None:
    """A forward() output's KV cache under either name, without touching the deprecated alias."""
    return out.cache if "cache" in getattr(out, "__dataclass_fields__", {}) else out.past_key_values


def _fork(cache):
    """A KV cache that starts from ``cache``'s tensors without copying them: a forward on the fork appends by
    making new tensors in the fork's own layer objects, so ``cache`` stays as it was."""
    fork = copy.copy(cache)
    fork.layers = [copy.copy(layer) for layer in cache.layers]
    return fork


class TransformersBackend(HFChatTemplateMixin, JudgeBackend):
    """A local causal LM through transformers; ``model`` is a local directory or hub id ("smollm2" = the
    embedded SmolLM2-135M-Instruct), the other keywords are ``TransformersOptions``."""

    Options = TransformersOptions

    @classmethod
    def locate(cls, model: str) -> None:
        from rewardkit.backends.embedded import ALIASES, gguf_dir

        if model in ALIASES:
            gguf_dir()  # installed (FileNotFoundError says how to install it)
        else:
            local_model_path(model)

    def __init__(self, model: str = "smollm2", **options: Any):
        o = self.options = TransformersOptions(**options)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from rewardkit.backends.embedded import ALIASES, EMBEDDED_NAME, embedded_model_path

        device = resolve_device(o.device)
        if device.startswith("cpu"):
            self.num_threads = resolve_threads(o.num_threads)
            if torch.get_num_threads() != self.num_threads:
                torch.set_num_threads(self.num_threads)
        else:
            self.num_threads = torch.get_num_threads()
        dtype = resolve_dtype(o.dtype, device)
        path = str(embedded_model_path(dtype)) if model in ALIASES else local_model_path(model)
        self.dtype = dtype
        self.min_shared_prefix = o.min_shared_prefix
        self.lock = threading.RLock()  # one forward at a time when called from several threads (serve-judge)
        self.model_id = f"{EMBEDDED_NAME if model in ALIASES else model}@{dtype}"
        # the embedded 135M model does not write the papers' verdict formats (every generate-mode verdict
        # came back invalid); its verdict probabilities are usable, so mode=auto reads those
        self.default_mode = "logit" if model in ALIASES else "generate"
        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        # sdpa: memory-efficient attention; eager would hold a rows x heads x T x T score tensor per layer
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype),
                                                          attn_implementation="sdpa").to(device).eval()
        self.device = device
        self.placement = place(self.model, device, dtype, batch_tokens=o.batch_tokens, share_prefix=o.share_prefix,
                               max_rows=o.batch_size, memory_fraction=o.memory_fraction, static_cache=o.static_cache,
                               overlap=o.overlap, sample_dtype=o.sample_dtype)
        self._sampler = None  # made at the first decode (``sampler``)
        if self.placement.static_cache and device.startswith("cuda"):
            allow_compiled_shapes(torch)
        self._worker: ThreadPoolExecutor | None = None
        self.batch_tokens = self.placement.batch_tokens
        self.batch_size = self.placement.max_rows
        self.share_prefix = self.placement.share_prefix
        self.max_prompt_tokens = o.max_prompt_tokens or getattr(self.model.config, "max_position_embeddings", None)

    def describe(self) -> str:
        return f"{self.model_id}: {self.placement.describe()}"

    @property
    def sampler(self):
        """What decodes: the model, or its copy in the placement's ``sample_dtype``, made at the first use, so an
        engine set up after the load (a colocated vLLM sampler sizing its memory) never finds the copy there."""
        if self._sampler is None:
            self._sampler = self.model
            if self.placement.sample_dtype and self.placement.sample_dtype != self.dtype:
                # first use is inside a decode's inference_mode: made there its weights would be inference
                # tensors, which ``refresh_sampler``'s in-place copy after an optimizer step may not write
                with self.torch.inference_mode(False):
                    self._sampler = copy.deepcopy(self.model).to(getattr(self.torch, self.placement.sample_dtype))
                self._sampler.eval().requires_grad_(False)
        return self._sampler

    # ------------------------------------------------------------------------------------ helpers
    def _to_device(self, array: np.ndarray):
        """A host array on the model's device; on a GPU through pinned memory without waiting for the device
        (a copy from pageable memory would wait for every queued kernel first)."""
        t = self.torch.from_numpy(array)
        if self.device.startswith("cuda"):
            return t.pin_memory().to(self.device, non_blocking=True)
        return t.to(self.device)

    def _pad(self, rows: Sequence[list[int]], width: int | None = None):
        """Left-padded ids, attention mask and position ids of token rows (padded to ``width`` when given),
        built on the host in one go."""
        width = max(width or 0, max(len(r) for r in rows))
        ids = np.full((len(rows), width), self.tokenizer.pad_token_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for k, r in enumerate(rows):
            ids[k, width - len(r):] = r
            mask[k, width - len(r):] = 1
        ids, mask = self._to_device(ids), self._to_device(mask)
        return ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)

    def _attention(self, rows: Sequence[list[int]], mask):
        """The attention mask a scoring pass is given: None for rows of one length (causal, no mask); with
        ``overlap``, the [B, 1, T, T] causal-and-padding mask built on the device (transformers would look at the
        2D mask's values on the host to decide, a device sync per pass), a padding row attending to itself only."""
        if len({len(r) for r in rows}) == 1:
            return None
        if not self.placement.overlap:
            return mask
        torch = self.torch
        t = mask.shape[1]
        causal = torch.ones((t, t), dtype=torch.bool, device=mask.device).tril_()
        full = causal[None, None] & mask.bool()[:, None, None, :]  # [B, 1, T, T]
        return full | torch.eye(t, dtype=torch.bool, device=mask.device)[None, None]

    def context_length(self) -> int | None:
        return self.max_prompt_tokens

    def _too_long(self, n: int) -> str | None:
        if self.max_prompt_tokens and n >= self.max_prompt_tokens:
            return f"prompt has {n} tokens; the model's context is {self.max_prompt_tokens}"
        return None

    def _batches(self, order: list[int], width) -> list[list[int]]:
        """Consecutive runs of ``order`` whose padded size (rows x widest row, ``width(i)`` tokens each) fits
        ``batch_tokens`` (and ``batch_size`` rows); a row wider than the budget goes alone."""
        return token_batches(order, width, self.batch_tokens, self.batch_size)

    # ----------------------------------------------------------------------------------- generate
    def generate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        with self.lock:
            return self._generate(requests)

    def _generate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        prompts = self.encode_many(self.render_many([r.messages for r in requests]))
        out: list[Completion | None] = [None] * len(requests)
        rows: list[tuple[int, int]] = []  # (request index, sample index)
        for i, (r, p) in enumerate(zip(requests, prompts, strict=True)):
            err = self._too_long(len(p))
            if err:
                out[i] = Completion([], Status.ERROR, len(p), error=err)
            else:
                rows += [(i, s) for s in range(r.n)]
        texts: dict[tuple[int, int], tuple[str, int, str]] = {}

        def params(row: tuple[int, int]) -> tuple:
            r = requests[row[0]]
            return (r.temperature, r.top_p, r.max_tokens, r.seed, r.min_tokens)

        for key, grp in groupby(sorted(rows, key=params), key=params):
            temperature, top_p, max_tokens, seed, min_tokens = key
            grp = list(grp)
            samples = self.sample_tokens([prompts[i] for i, _ in grp], max_new_tokens=max_tokens,
                                         temperature=temperature, top_p=top_p, min_new_tokens=min_tokens, seed=seed)
            decoded = self.tokenizer.batch_decode([toks for toks, _ in samples], skip_special_tokens=True)
            for rw, (toks, ended), text in zip(grp, samples, decoded, strict=True):
                texts[rw] = (text, len(toks) - ended, "stop" if ended else "length")
        for i, r in enumerate(requests):
            if out[i] is not None:
                continue
            samples = [texts[(i, s)] for s in range(r.n)]
            txts, reasons = [], []
            for text, _, finish in samples:
                if r.stop:
                    cut = min((text.find(s) for s in r.stop if s in text), default=-1)
                    if cut >= 0:
                        text, finish = text[:cut], "stop"
                txts.append(text)
                reasons.append(finish)
            out[i] = Completion(txts, Status.OK, len(prompts[i]), sum(s[1] for s in samples), reasons)
        return out  # type: ignore[return-value]

    def sample_tokens(self, prompts: Sequence[list[int]], *, max_new_tokens: int, temperature: float = 0.0,
                      top_p: float = 1.0, top_k: int | None = None, min_new_tokens: int = 0,
                      seed: int | None = None) -> list[tuple[list[int], bool]]:
        """Decode every prompt row (token ids; a row per sample): ``(new tokens, ended)`` per row, in order, the
        tokens through the end-of-sequence token when one came (``ended``). Greedy at temperature 0.

        Rows are sorted by length and packed by memory (``Placement.decode_batches``): rows x (prompt +
        max_new_tokens) within the placement's ``generation_tokens`` (the KV cache they hold) and rows x prompt
        within ``generation_prefill_tokens`` (the prefill's activations), both counted on the padded shape the
        batch decodes as. ``seed`` seeds torch once, before the first batch. The GRPO trainer
        samples its rollouts here too, so judges and policies share one engine. ``top_k=None`` samples from the
        whole distribution (transformers would apply its default top_k=50).

        With ``static_cache`` the decode uses transformers' static KV cache (its decode step compiled on a GPU):
        a batch is padded with copies of its last row to ``Placement.decode_rows`` rows and its prompts
        left-padded to ``Placement.decode_width`` tokens, so the compiled step sees a few shapes.
        """
        torch = self.torch
        pl = self.placement
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        batches = pl.decode_batches(order, lambda i: len(prompts[i]), max_new_tokens)
        eos, pad = self.tokenizer.eos_token_id, self.tokenizer.pad_token_id
        sample = temperature > 0
        out: list[tuple[list[int], bool] | None] = [None] * len(prompts)
        with self.lock:
            if seed is not None:
                torch.manual_seed(seed)
            for batch in batches:
                rows = [prompts[i] for i in batch]
                n, width = pl.decode_shape(len(rows), max(len(r) for r in rows), max_new_tokens)
                ids, mask, _ = self._pad(rows + [rows[-1]] * (n - len(rows)), width)
                extra = {"cache_implementation": "static"} if pl.static_cache else {}
                with torch.inference_mode():
                    gen = self.sampler.generate(
                        input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens,
                        do_sample=sample, temperature=temperature if sample else None,
                        top_p=top_p if sample else None, top_k=(top_k or 0) if sample else None,
                        min_new_tokens=min(min_new_tokens, max_new_tokens) or None, pad_token_id=pad, **extra,
                    )
                new = gen[: len(batch), ids.shape[1]:].tolist()  # one device transfer; padding rows dropped
                for i, toks in zip(batch, new, strict=True):
                    ended = eos in toks
                    out[i] = (toks[: toks.index(eos) + 1] if ended else toks, ended)
        return out  # type: ignore[return-value]

    def drop_sampling_copy(self) -> None:
        """Decode with the model's own weights from now on (another engine samples): no copy, or the copy freed."""
        self._sampler = self.model

    def refresh_sampler(self) -> None:
        """Copy the model's weights into its sampling copy (after an optimizer step); nothing without a copy
        (one not made yet is made from the weights as they are then)."""
        if self._sampler is None or self._sampler is self.model:
            return
        with self.torch.no_grad():
            for dst, src in zip(self._sampler.parameters(), self.model.parameters(), strict=True):
                dst.copy_(src)  # in place: a compiled decode step keeps its weights' addresses

    # ------------------------------------------------------------------------------ verdict_probs
    def verdict_probs(self, requests: Sequence[VerdictRequest]) -> list[VerdictResult]:
        """P(choice | prompt) renormalised over the choices (see ``_verdict_probs``)."""
        check_choices(requests)
        with self.lock:
            return self._verdict_probs(requests)

    def _verdict_probs(self, requests: Sequence[VerdictRequest]) -> list[VerdictResult]:
        """P(choice | prompt) renormalised over the choices.

        The requests are rendered and tokenised in one call each per chunk (one chunk, or with ``overlap`` a
        small first chunk and doubling ones, each prepared by a worker thread while the device runs the one
        before), and each choice's continuation tokens are found once per distinct prompt tail
        (``ContinuationTokens``). One prompt pass per request gives every choice's first token. When the choices
        differ in their first token (A/B/Tie, YES/NO) that decides; otherwise (1 / 0.5 / 0) the later tokens of
        each choice are scored from the prompt's KV cache, a forward over a few tokens instead of the whole
        prompt again. What is read goes to the host once, at the end.
        """
        out: list[VerdictResult | None] = [None] * len(requests)
        prompts: dict[int, list[int]] = {}
        conts: dict[int, list[list[int]]] = {}
        continuation = self.continuations()

        def prepare(idx: list[int]) -> list[int]:  # render + tokenise a chunk; its valid request indices
            texts = self.render_many([requests[i].messages for i in idx], [requests[i].assistant_prefix for i in idx])
            valid = []
            for i, t, p in zip(idx, texts, self.encode_many(texts), strict=True):
                prompts[i], conts[i] = p, [continuation(t, p, c) for c in requests[i].choices]
                err = self._too_long(len(p) + max(len(c) for c in conts[i]))
                if err:
                    out[i] = VerdictResult(np.array([]), Status.ERROR, len(p), error=err)
                else:
                    valid.append(i)
            return valid

        def pick(batch: list[int], logp):  # [B, V] -> [B, C]: the choices' first tokens, read on the device
            width = max(len(conts[i]) for i in batch)
            firsts = np.array([[c[0] for c in conts[i]] + [0] * (width - len(conts[i])) for i in batch], dtype=np.int64)
            return logp.gather(1, self._to_device(firsts))

        def consume(i: int, first: np.ndarray, tail: list[float] | None) -> None:
            lp = first[: len(conts[i])].astype(np.float64)
            if tail is not None:
                lp = lp + np.array(tail)
            out[i] = choice_result(lp, len(prompts[i]))

        pending: list = []
        for valid in self._prepared(requests, prepare):
            tails = {i: conts[i] for i in valid if not first_tokens_decide(conts[i])}
            self._each_last_logprobs(prompts, valid, pick, consume, tails, pending)
        self._read(pending, consume)
        return out  # type: ignore[return-value]

    def _prepared(self, requests: Sequence[VerdictRequest], prepare):
        """``prepare(chunk)`` of consecutive chunks of request indices, in order: all at once, or with
        ``overlap`` a first chunk of about one scoring pass and doubling ones, the next chunk prepared by a
        worker thread while the caller runs this one (the tokenizer releases the GIL; the device runs ahead)."""
        n = len(requests)
        if not self.placement.overlap or n < 2:
            yield prepare(list(range(n)))
            return
        chars = max(1, max(sum(len(m.get("content") or "") for m in r.messages) for r in requests[: 64]))
        size = max(1, min(n, self.batch_tokens * 3 // chars))  # ~3 characters per token: one pass's rows
        chunks, start = [], 0
        while start < n:
            chunks.append(list(range(start, min(n, start + size))))
            start, size = start + size, size * 2
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="rewardkit-prepare")
        ahead = self._worker.submit(prepare, chunks[0])
        for nxt in chunks[1:]:
            done, ahead = ahead.result(), self._worker.submit(prepare, nxt)
            yield done
        yield ahead.result()

    def top_logprobs(self, requests: Sequence[VerdictRequest], k: int = 20) -> list[TopLogprobs]:
        """The ``k`` most likely next tokens after each prompt + assistant prefix (decoded text, log-prob)."""
        prompts = self.encode_many(self.render_many([r.messages for r in requests],
                                                    [r.assistant_prefix for r in requests]))
        out: list[TopLogprobs | None] = [None] * len(requests)
        valid = []
        for i, p in enumerate(prompts):
            err = self._too_long(len(p) + 1)
            if err:
                out[i] = TopLogprobs([], Status.ERROR, len(p), error=err)
            else:
                valid.append(i)

        def pick(batch: list[int], logp):
            return logp.topk(min(k, logp.shape[-1]))  # (values, token ids), each [B, k]

        def consume(i: int, top: tuple[np.ndarray, np.ndarray], _tail) -> None:
            vals, ids = top
            toks = [(self.tokenizer.decode([t]), float(v)) for t, v in zip(ids.tolist(), vals.tolist(), strict=True)]
            out[i] = TopLogprobs(toks, Status.OK, len(prompts[i]))

        with self.lock:
            self._each_last_logprobs(prompts, valid, pick, consume)
        return out  # type: ignore[return-value]

    def score_tokens(self, requests: Sequence[TokenScoreRequest]) -> list[TokenScores]:
        """log p(y_t), H(p_t) and KL(U || p_t) at every response token: one forward pass over prompt + response
        per request, length-sorted left-padded batches under the token budget, logits kept for the response
        positions only (left padding puts them last); the statistics are computed on the device."""
        torch = self.torch
        out: list[TokenScores | None] = [None] * len(requests)
        rows: dict[int, tuple[list[int], int]] = {}  # i -> (prompt + response ids, response length)
        spans: dict[int, np.ndarray | None] = {}  # i -> [n, 2] character spans of the response tokens
        rendered = self.render_many([r.messages for r in requests])
        prompt_ids = self.encode_many(rendered)
        for i, (r, prompt, p_ids) in enumerate(zip(requests, rendered, prompt_ids, strict=True)):
            ids, offsets = self.encode_with_offsets(prompt + r.response)
            n = len(ids) - common_prefix_length(p_ids, ids)  # a merge across the boundary counts as response
            err = "empty response: no tokens to score" if n == 0 or not r.response else self._too_long(len(ids))
            if err:
                out[i] = TokenScores(*(np.array([]),) * 3, Status.ERROR, len(p_ids), error=err)
            else:
                rows[i] = (ids, n)
                spans[i] = response_offsets(offsets, n, len(prompt))
        with self.lock:
            for batch in self._batches(sorted(rows, key=lambda i: len(rows[i][0])), lambda i: len(rows[i][0])):
                ids, mask, pos = self._pad([rows[i][0] for i in batch])
                keep = max(rows[i][1] for i in batch) + 1
                with torch.inference_mode():
                    logits = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=keep).logits
                    for k, i in enumerate(batch):
                        full, n = rows[i]
                        logp = torch.log_softmax(logits[k, -n - 1:-1].float(), dim=-1)  # [n, V]
                        entropy, kl = distribution_stats(logp)
                        lp = logp.gather(1, torch.tensor(full[-n:], device=logp.device)[:, None])[:, 0].double()
                        lp, entropy, kl = torch.stack([lp, entropy, kl]).cpu().numpy()  # one transfer per row
                        out[i] = TokenScores(lp, entropy, kl, Status.OK, len(full) - n, logp.shape[-1], offsets=spans[i])
        return out  # type: ignore[return-value]

    # ---------------------------------------------------------------- next-token log-probs, batched
    def _each_last_logprobs(self, prompts, indices: list[int], pick, consume,
                            tails: dict[int, list[list[int]]] | None = None, pending: list | None = None) -> None:
        """Call ``consume(i, picked, tail)`` for each prompt index: ``picked`` is row ``i`` of what
        ``pick(batch, logp)`` reads on the device from the batch's next-token log-probabilities ``logp`` [B, V]
        (a tensor, or a tuple of tensors), brought to the host in one transfer at the end (or left in
        ``pending`` for the caller's ``_read``).

        ``tails[i]`` (optional) are token continuations; ``tail[j]`` is then the summed log-probability of
        ``tails[i][j][1:]`` after the prompt and the continuation's first token (None without tails).
        Prompts sharing a long prefix are scored against its KV cache (``share_prefix``); the rest go in
        length-sorted, left-padded batches under the token budget. Only the read positions' logits are made.
        """
        torch = self.torch
        tails = tails or {}
        rest = list(indices)
        mine = pending is None
        pending = [] if pending is None else pending
        with torch.inference_mode():
            if self.share_prefix:
                groups, rest = self._prefix_groups(prompts, indices)
                for plen, members in groups:
                    self._with_prefix(prompts, plen, members, pick, tails, pending)
            for batch in self._batches(sorted(rest, key=lambda i: len(prompts[i])), lambda i: len(prompts[i])):
                rows = [prompts[i] for i in batch]
                ids, mask, pos = self._pad(rows)
                res = self.model(input_ids=ids, attention_mask=self._attention(rows, mask), position_ids=pos,
                                 logits_to_keep=1, use_cache=any(i in tails for i in batch))
                self._emit(batch, res, mask, pos, pick, tails, pending)
        if mine:
            self._read(pending, consume)

    def _emit(self, batch: list[int], res, mask, pos, pick, tails: dict[int, list[list[int]]], pending: list) -> None:
        """Queue each row's picked last-position log-probs (on the device) and its tails' scores."""
        logp = self.torch.log_softmax(res.logits[:, -1, :].float(), -1)  # [B, V]
        picked = pick(batch, logp)
        scored = {}
        cache = _cache_of(res)
        if cache is not None and any(i in tails for i in batch):
            scored = self._score_tails(batch, cache, mask, pos, tails)
        pending.append((batch, picked if isinstance(picked, tuple) else (picked,), scored, not isinstance(picked, tuple)))

    def _read(self, pending: list, consume) -> None:
        """Bring every queued batch's picked values to the host in one transfer and hand them to ``consume``."""
        if not pending:
            return
        torch = self.torch
        parts = len(pending[0][1])
        width = [max(p[1][j].shape[1] for p in pending) for j in range(parts)]
        host = [torch.cat([torch.nn.functional.pad(p[1][j], (0, width[j] - p[1][j].shape[1])) for p in pending])
                .cpu().numpy() for j in range(parts)]  # [N, C] per part, padded to the widest batch
        row = 0
        for batch, _, scored, single in pending:
            for i in batch:
                consume(i, host[0][row] if single else tuple(h[row] for h in host), scored.get(i))
                row += 1

    def _score_tails(self, batch: list[int], cache, mask, pos, tails: dict[int, list[list[int]]]) -> dict[int, list[float]]:
        """For each row with tails: sum of log p(c[t] | prompt, c[:t]) over t >= 1 for each continuation c,
        from the batch's KV cache (rows repeated once per continuation; continuations right-padded)."""
        torch = self.torch
        rows = [(k, i, j) for k, i in enumerate(batch) for j in range(len(tails.get(i, ())))]
        out = {i: [0.0] * len(tails[i]) for i in batch if i in tails}
        long = [(k, i, j) for k, i, j in rows if len(tails[i][j]) > 1]
        if not long:
            return out
        sel = torch.tensor([k for k, _, _ in long], device=mask.device)
        cache.reorder_cache(sel)  # one cache row per (prompt, continuation)
        width = max(len(tails[i][j]) for _, i, j in long) - 1
        feed = np.full((len(long), width), self.tokenizer.pad_token_id, dtype=np.int64)  # token t predicts t + 1
        target = np.zeros((len(long), width), dtype=np.int64)
        tmask = np.zeros((len(long), width), dtype=np.int64)
        for r, (_, i, j) in enumerate(long):
            c = tails[i][j]
            feed[r, :len(c) - 1], target[r, :len(c) - 1], tmask[r, :len(c) - 1] = c[:-1], c[1:], 1
        ids, tmask_d = torch.from_numpy(feed).to(mask.device), torch.from_numpy(tmask).to(mask.device)
        full_mask = torch.cat([mask.index_select(0, sel), tmask_d.to(mask.dtype)], 1)
        tpos = pos.index_select(0, sel)[:, -1:] + 1 + torch.arange(width, device=mask.device)
        logits = self.model(input_ids=ids, attention_mask=full_mask, position_ids=tpos,
                            **{_cache_kwarg(self.model): cache}).logits
        logp = torch.log_softmax(logits.float(), -1)  # [R, W, V]
        read = logp.gather(2, torch.from_numpy(target).to(mask.device)[..., None])[..., 0].cpu().numpy()  # [R, W]
        for r, (_, i, j) in enumerate(long):
            out[i][j] = float(read[r, : len(tails[i][j]) - 1].astype(np.float64).sum())
        return out

    def _prefix_groups(self, prompts: list[list[int]], indices: list[int]):
        """Groups ``(shared length, members)`` of prompts with a long common token prefix, and the rest.

        Sorting the token lists puts prompts with a common prefix next to each other; a prompt joins the
        current group when it shares at least ``min_shared_prefix`` tokens and a quarter of its length.
        """
        groups: list[tuple[int, list[int]]] = []
        rest: list[int] = []
        cur: list[int] = []
        common = 0

        def close() -> None:
            if len(cur) >= 2:
                groups.append((common, list(cur)))
            else:
                rest.extend(cur)

        for i in sorted(indices, key=lambda i: prompts[i]):
            p = prompts[i]
            if cur:
                shared = min(common, common_prefix_length(prompts[cur[-1]], p), len(p) - 1)
                if shared >= self.min_shared_prefix and shared >= len(p) // 4:
                    cur.append(i)
                    common = shared
                    continue
                close()
            cur, common = [i], len(p) - 1
        close()
        return groups, rest

    def _with_prefix(self, prompts, plen: int, members: list[int], pick, tails: dict[int, list[list[int]]],
                     pending: list) -> None:
        """Encode ``prompts[members[0]][:plen]`` once, then each batch of suffixes against its KV cache
        (forked, never copied)."""
        torch = self.torch
        prefix = torch.tensor([prompts[members[0]][:plen]], device=self.device)
        base = _cache_of(self.model(input_ids=prefix, use_cache=True, logits_to_keep=1))
        order = sorted(members, key=lambda i: len(prompts[i]))
        for batch in self._batches(order, lambda i: len(prompts[i])):  # rows x (prefix + suffix) cached
            ids, smask, _ = self._pad([prompts[i][plen:] for i in batch])  # suffixes, left-padded
            n = len(batch)
            mask = torch.cat([torch.ones((n, plen), dtype=smask.dtype, device=self.device), smask], 1)
            pos = plen + (smask.cumsum(-1) - 1).clamp(min=0)
            cache = _fork(base)
            if n > 1:
                cache.batch_repeat_interleave(n)
            res = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1,
                             **{_cache_kwarg(self.model): cache})
            self._emit(batch, res, mask, pos, pick, tails, pending)

    def close(self) -> None:
        if self._worker is not None:
            self._worker.shutdown()
        del self.model, self._sampler


def allow_compiled_shapes(torch, limit: int = 64) -> None:
    """Let torch.compile keep a compiled decode step per shape bucket (row counts x widths, several models in one
    process) instead of falling back to eager after its default of 8 recompilations per function."""
    cfg = torch._dynamo.config
    name = "recompile_limit" if hasattr(cfg, "recompile_limit") else "cache_size_limit"
    if getattr(cfg, name) < limit:
        setattr(cfg, name, limit)


def token_batches(order: Sequence[int], width, budget: int, max_rows: int | None = None) -> list[list[int]]:
    """Split ``order`` into consecutive batches with rows x max(width) <= ``budget`` tokens (and at most
    ``max_rows`` rows); a single row over the budget forms its own batch. Sort ``order`` by width first."""
    out: list[list[int]] = []
    cur: list[int] = []
    widest = 0
    for i in order:
        w = max(1, int(width(i)))
        if cur and ((len(cur) + 1) * max(widest, w) > budget or (max_rows is not None and len(cur) >= max_rows)):
            out.append(cur)
            cur, widest = [], 0
        cur.append(i)
        widest = max(widest, w)
    if cur:
        out.append(cur)
    return out


def common_prefix_length(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i

