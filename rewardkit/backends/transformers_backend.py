"""transformers backend (CPU and GPU): padding-aware batched generation and verdict-logit scoring.

Requests are sorted by prompt length and packed into batches under a token budget (``batch_tokens``:
rows x padded width, so a batch of long prompts holds fewer rows than one of short prompts); left padding
with explicit position ids keeps padded rows numerically identical to unpadded ones. Attention is
PyTorch's scaled-dot-product kernel (``sdpa``), and only the logits that are read are computed: one
position per prompt, plus the few positions of multi-token verdict choices, which continue from the
prompt's KV cache instead of re-encoding the prompt once per choice. Verdict requests that share a long
token prefix (a live tournament: problem + new trace, then three anchors) encode that prefix once and
score only the suffixes against its KV cache.
"""

from __future__ import annotations

import copy
import inspect
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
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
    choice_probs,
    continuation_tokens,
    distribution_stats,
)
from rewardkit.options import Options, option
from rewardkit.types import Status


@cache
def cpu_supports_bf16() -> bool:
    """True when the CPU has native bf16 arithmetic (AVX512-BF16 or AMX-BF16), where bf16 pays on CPU."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        flags = ""
    if "avx512_bf16" in flags or "amx_bf16" in flags:
        return True
    import torch

    return "AMX" in torch.backends.cpu.get_cpu_capability()


def resolve_dtype(dtype: str, device: str) -> str:
    """``auto`` -> bfloat16 on a bf16-capable CPU or GPU, else float32; other names pass through."""
    if dtype != "auto":
        return dtype
    import torch

    if device.startswith("cuda"):
        return "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
    return "bfloat16" if cpu_supports_bf16() else "float32"


def default_threads() -> int:
    """Torch CPU threads for a judge: the cores this process may use that are not already busy.

    On a shared machine OpenMP threads spin-wait for cores other processes hold, so a thread per core ran
    about half as fast per call as one thread on the 2-core development box (benchmarks/results/
    judge_memory.md); on an idle machine this is every core the process may use.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    try:
        busy = os.getloadavg()[0]
    except OSError:
        busy = 0.0
    return max(1, min(cores, int(cores - busy + 0.5)))


def resolve_threads(num_threads: int | None) -> int:
    """``num_threads``, else ``$REWARDKIT_TORCH_THREADS``, else ``$OMP_NUM_THREADS``, else ``default_threads()``."""
    for value, where in ((num_threads, "num_threads"), (os.environ.get("REWARDKIT_TORCH_THREADS"), "REWARDKIT_TORCH_THREADS"),
                         (os.environ.get("OMP_NUM_THREADS"), "OMP_NUM_THREADS")):
        if value in (None, "", 0):
            continue
        try:
            n = int(value)
        except ValueError:
            raise ValueError(f"{where}={value!r}: expected a positive number of threads") from None
        if n < 1:
            raise ValueError(f"{where}={value!r}: expected a positive number of threads")
        return n
    return default_threads()


@dataclass(frozen=True)
class TransformersOptions(Options):
    """The transformers backend's options (keywords of ``TransformersBackend``, or ``smollm2?dtype=...``)."""

    dtype: DType = option("auto", "float32, bfloat16, float16 or auto (bf16 where the CPU/GPU supports it)")
    device: str = option("cpu", "torch device (cpu, cuda, cuda:1)")
    batch_tokens: int = option(4096, "token budget per forward pass (rows x padded width); generation packs rows "
                                     "while rows x (prompt + max new tokens) stays within 4 budgets")
    batch_size: int | None = option(None, "cap on rows per forward pass (None: the token budget alone decides)")
    max_prompt_tokens: int | None = option(None, "longest prompt accepted (None: the model's context length)")
    share_prefix: bool = option(True, "encode a token prefix shared by several verdict requests once (KV cache)")
    min_shared_prefix: int = option(64, "shortest shared prefix (tokens) worth re-using")
    num_threads: int | None = option(None, "torch CPU threads (process-wide; default $REWARDKIT_TORCH_THREADS, "
                                           "$OMP_NUM_THREADS, else the idle cores: default_threads)")

    def __post_init__(self) -> None:
        super().__post_init__()
        self._at_least(1, "batch_tokens", "batch_size")


def local_model_path(model: str) -> str:
    """The folder to load ``model`` from: a local model folder, or a hub id's snapshot already in the local
    Hugging Face cache. Nothing is downloaded (``HF_HUB_OFFLINE``-style): a name that is neither is a
    ``ValueError`` at once, where transformers would spend its hub retries (46 s here) and then fail."""
    p = Path(model).expanduser()
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise ValueError(f"judge {model!r}: the folder has no config.json (not a transformers model folder)")
        return str(p)
    if p.exists():
        raise ValueError(f"judge {model!r}: a file, not a model folder (a GGUF file is 'llamacpp:{model}')")
    from huggingface_hub import snapshot_download

    try:  # a hub id downloaded earlier (the cache under $HF_HOME)
        return snapshot_download(model, local_files_only=True)
    except Exception:  # not cached, or not a valid hub id (huggingface_hub raises several kinds)
        raise ValueError(
            f"judge {model!r}: no such model folder, and no hub model of that name in the local Hugging Face "
            "cache; rewardkit loads judges from disk only (pass a folder, 'smollm2' for the embedded model, a "
            f"server URL, or download the model first: `hf download {model}`)") from None


def _cache_kwarg(model) -> str:
    """The forward() keyword for a KV cache: ``cache`` in current transformers (``past_key_values`` is deprecated
    there and goes in 5.40), ``past_key_values`` in the 5.x releases before the rename."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _cache_of(out) -> object | None:
    """A forward() output's KV cache under either name, without touching the deprecated alias."""
    return out.cache if "cache" in getattr(out, "__dataclass_fields__", {}) else out.past_key_values


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

        dtype, device, batch_size, batch_tokens = o.dtype, o.device, o.batch_size, o.batch_tokens
        share_prefix, min_shared_prefix, num_threads, max_prompt_tokens = (
            o.share_prefix, o.min_shared_prefix, o.num_threads, o.max_prompt_tokens)
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"transformers backend: device={device!r} but torch sees no CUDA device "
                             f"(torch {torch.__version__}); use device=cpu")
        if device == "cpu" or device.startswith("cpu"):
            self.num_threads = resolve_threads(num_threads)
            if torch.get_num_threads() != self.num_threads:
                torch.set_num_threads(self.num_threads)
        else:
            self.num_threads = torch.get_num_threads()
        dtype = resolve_dtype(dtype, device)
        path = str(embedded_model_path(dtype)) if model in ALIASES else local_model_path(model)
        self.dtype = dtype
        self.share_prefix = share_prefix
        self.min_shared_prefix = min_shared_prefix
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
        self.batch_size = int(batch_size) if batch_size is not None else None
        self.batch_tokens = int(batch_tokens)
        self.max_prompt_tokens = max_prompt_tokens or getattr(self.model.config, "max_position_embeddings", None)

    # ------------------------------------------------------------------------------------ helpers
    def _pad(self, rows: Sequence[list[int]]):
        torch = self.torch
        width = max(len(r) for r in rows)
        pad = self.tokenizer.pad_token_id
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for k, r in enumerate(rows):
            ids[k, width - len(r):] = torch.tensor(r)
            mask[k, width - len(r):] = 1
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        return ids.to(self.device), mask.to(self.device), pos.to(self.device)

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
        torch = self.torch
        prompts = [self.encode(self.render(r.messages)) for r in requests]
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
            grp = sorted(grp, key=lambda rw: len(prompts[rw[0]]))
            # decoding holds only the KV cache (no prefill activations): rows x (prompt + new) <= 4 budgets
            widths = [(len(prompts[i]) + max_tokens + 3) // 4 for i, _ in grp]
            for batch in self._batches(list(range(len(grp))), widths.__getitem__):
                brows = [grp[b] for b in batch]
                ids, mask, _ = self._pad([prompts[i] for i, _ in brows])
                if seed is not None:
                    torch.manual_seed(seed)
                sample = temperature > 0
                with torch.inference_mode():
                    gen = self.model.generate(
                        input_ids=ids, attention_mask=mask, max_new_tokens=max_tokens,
                        do_sample=sample, temperature=temperature if sample else None,
                        top_p=top_p if sample else None, top_k=None,
                        min_new_tokens=min(min_tokens, max_tokens) or None,
                        pad_token_id=self.tokenizer.pad_token_id,
                    )
                new = gen[:, ids.shape[1]:]
                eos = self.tokenizer.eos_token_id
                for k, rw in enumerate(brows):
                    toks = new[k].tolist()
                    n = toks.index(eos) if eos in toks else len(toks)
                    finish = "stop" if n < len(toks) or (eos in toks) else "length"
                    texts[rw] = (self.tokenizer.decode(toks[:n], skip_special_tokens=True), n, finish)
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

    # ------------------------------------------------------------------------------ verdict_probs
    def verdict_probs(self, requests: Sequence[VerdictRequest]) -> list[VerdictResult]:
        """P(choice | prompt) renormalised over the choices (see ``_verdict_probs``)."""
        with self.lock:
            return self._verdict_probs(requests)

    def _verdict_probs(self, requests: Sequence[VerdictRequest]) -> list[VerdictResult]:
        """P(choice | prompt) renormalised over the choices.

        One prompt pass per request gives every choice's first token. When the choices differ in their first
        token (A/B/Tie, YES/NO) that decides; otherwise (1 / 0.5 / 0) the later tokens of each choice are
        scored from the prompt's KV cache, a forward over a few tokens instead of the whole prompt again.
        """
        out: list[VerdictResult | None] = [None] * len(requests)
        prompts, conts = [], []
        for i, r in enumerate(requests):
            text = self.render(r.messages, r.assistant_prefix)
            p = self.encode(text)
            prompts.append(p)
            conts.append([continuation_tokens(self.encode, text, p, c) for c in r.choices])
            err = self._too_long(len(p) + max(len(c) for c in conts[-1]))
            if err:
                out[i] = VerdictResult(np.array([]), Status.ERROR, len(p), error=err)
        valid = [i for i in range(len(requests)) if out[i] is None]
        tails = {i: conts[i] for i in valid if len({c[0] for c in conts[i]}) < len(conts[i])}

        def consume(i: int, logp, tail: list[float] | None) -> None:
            lp = np.array([logp[c[0]].item() for c in conts[i]])
            if tail is not None:
                lp = lp + np.array(tail)
            out[i] = VerdictResult(choice_probs(lp), Status.OK, len(prompts[i]))

        self._each_last_logprobs(prompts, valid, consume, tails)
        return out  # type: ignore[return-value]

    def top_logprobs(self, requests: Sequence[VerdictRequest], k: int = 20) -> list[TopLogprobs]:
        """The ``k`` most likely next tokens after each prompt + assistant prefix (decoded text, log-prob)."""
        prompts = [self.encode(self.render(r.messages, r.assistant_prefix)) for r in requests]
        out: list[TopLogprobs | None] = [None] * len(requests)
        valid = []
        for i, p in enumerate(prompts):
            err = self._too_long(len(p) + 1)
            if err:
                out[i] = TopLogprobs([], Status.ERROR, len(p), error=err)
            else:
                valid.append(i)

        def consume(i: int, logp, _tail) -> None:
            vals, ids = logp.topk(min(k, logp.shape[-1]))
            toks = [(self.tokenizer.decode([t]), float(v)) for t, v in zip(ids.tolist(), vals.tolist(), strict=True)]
            out[i] = TopLogprobs(toks, Status.OK, len(prompts[i]))

        with self.lock:
            self._each_last_logprobs(prompts, valid, consume)
        return out  # type: ignore[return-value]

    def score_tokens(self, requests: Sequence[TokenScoreRequest]) -> list[TokenScores]:
        """log p(y_t), H(p_t) and KL(U || p_t) at every response token: one forward pass over prompt + response
        per request, length-sorted left-padded batches under the token budget, logits kept for the response
        positions only (left padding puts them last)."""
        torch = self.torch
        out: list[TokenScores | None] = [None] * len(requests)
        rows: dict[int, tuple[list[int], int]] = {}  # i -> (prompt + response ids, response length)
        spans: dict[int, np.ndarray | None] = {}  # i -> [n, 2] character spans of the response tokens
        for i, r in enumerate(requests):
            prompt = self.render(r.messages)
            p_ids, (ids, offsets) = self.encode(prompt), self._encode_with_offsets(prompt + r.response)
            n = len(ids) - common_prefix_length(p_ids, ids)  # a merge across the boundary counts as response
            err = "empty response: no tokens to score" if n == 0 or not r.response else self._too_long(len(ids))
            if err:
                out[i] = TokenScores(*(np.array([]),) * 3, Status.ERROR, len(p_ids), error=err)
            else:
                rows[i] = (ids, n)
                spans[i] = None if offsets is None else np.clip(np.asarray(offsets[-n:]) - len(prompt), 0, None)
        with self.lock:
            for batch in self._batches(sorted(rows, key=lambda i: len(rows[i][0])), lambda i: len(rows[i][0])):
                ids, mask, pos = self._pad([rows[i][0] for i in batch])
                keep = max(rows[i][1] for i in batch) + 1
                with torch.inference_mode():
                    logits = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=keep).logits
                for k, i in enumerate(batch):
                    full, n = rows[i]
                    logp = torch.log_softmax(logits[k, -n - 1:-1].float(), dim=-1).cpu().numpy()
                    entropy, kl = distribution_stats(logp)
                    lp = logp[np.arange(n), np.asarray(full[-n:])]
                    out[i] = TokenScores(lp, entropy, kl, Status.OK, len(full) - n, logp.shape[-1], offsets=spans[i])
        return out  # type: ignore[return-value]

    def _encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]] | None]:
        """Token ids of ``text`` and each token's character span (fast tokenizers; None from slow ones)."""
        if not getattr(self.tokenizer, "is_fast", False):
            return self.encode(text), None
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return enc.input_ids, [tuple(o) for o in enc.offset_mapping]

    # ---------------------------------------------------------------- next-token log-probs, batched
    def _each_last_logprobs(self, prompts: list[list[int]], indices: list[int], consume,
                            tails: dict[int, list[list[int]]] | None = None) -> None:
        """Call ``consume(i, logp, tail)`` with the next-token log-probabilities after ``prompts[i]``.

        ``tails[i]`` (optional) are token continuations; ``tail[j]`` is then the summed log-probability of
        ``tails[i][j][1:]`` after the prompt and the continuation's first token (None without tails).
        Prompts sharing a long prefix are scored against its KV cache (``share_prefix``); the rest go in
        length-sorted, left-padded batches under the token budget. Only the read positions' logits are made.
        """
        torch = self.torch
        tails = tails or {}
        rest = list(indices)
        if self.share_prefix:
            groups, rest = self._prefix_groups(prompts, indices)
            for plen, members in groups:
                self._with_prefix(prompts, plen, members, consume, tails)
        for batch in self._batches(sorted(rest, key=lambda i: len(prompts[i])), lambda i: len(prompts[i])):
            ids, mask, pos = self._pad([prompts[i] for i in batch])
            with torch.inference_mode():
                res = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1,
                                 use_cache=any(i in tails for i in batch))
                self._emit(batch, res, mask, pos, consume, tails)

    def _emit(self, batch: list[int], res, mask, pos, consume, tails: dict[int, list[list[int]]]) -> None:
        """Hand each row's last-position log-probs (and its tails' scores) to ``consume``."""
        logp = self.torch.log_softmax(res.logits[:, -1, :].float(), -1)
        scored = {}
        cache = _cache_of(res)
        if cache is not None and any(i in tails for i in batch):
            scored = self._score_tails(batch, cache, mask, pos, tails)
        for k, i in enumerate(batch):
            consume(i, logp[k], scored.get(i))

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
        feed = [tails[i][j][:-1] for _, i, j in long]  # token t predicts token t + 1
        width = max(len(f) for f in feed)
        ids = torch.full((len(long), width), self.tokenizer.pad_token_id, dtype=torch.long)
        tmask = torch.zeros((len(long), width), dtype=mask.dtype)
        for r, f in enumerate(feed):
            ids[r, :len(f)] = torch.tensor(f)
            tmask[r, :len(f)] = 1
        ids, tmask = ids.to(mask.device), tmask.to(mask.device)
        full_mask = torch.cat([mask.index_select(0, sel), tmask], 1)
        tpos = pos.index_select(0, sel)[:, -1:] + 1 + torch.arange(width, device=mask.device)
        logits = self.model(input_ids=ids, attention_mask=full_mask, position_ids=tpos,
                            **{_cache_kwarg(self.model): cache}).logits
        logp = torch.log_softmax(logits.float(), -1)
        for r, (_, i, j) in enumerate(long):
            c = tails[i][j]
            out[i][j] = float(sum(logp[r, t - 1, c[t]].item() for t in range(1, len(c))))
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

    def _with_prefix(self, prompts: list[list[int]], plen: int, members: list[int], consume,
                     tails: dict[int, list[list[int]]]) -> None:
        """Encode ``prompts[members[0]][:plen]`` once, then each batch of suffixes against its KV cache."""
        torch = self.torch
        with torch.inference_mode():
            prefix = torch.tensor([prompts[members[0]][:plen]], device=self.device)
            base = _cache_of(self.model(input_ids=prefix, use_cache=True, logits_to_keep=1))
            order = sorted(members, key=lambda i: len(prompts[i]))
            for batch in self._batches(order, lambda i: len(prompts[i])):  # rows x (prefix + suffix) cached
                ids, smask, _ = self._pad([prompts[i][plen:] for i in batch])  # suffixes, left-padded
                n = len(batch)
                mask = torch.cat([torch.ones((n, plen), dtype=smask.dtype, device=self.device), smask], 1)
                pos = plen + (smask.cumsum(-1) - 1).clamp(min=0)
                cache = copy.deepcopy(base)
                if n > 1:
                    cache.batch_repeat_interleave(n)
                res = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1,
                                 **{_cache_kwarg(self.model): cache})
                self._emit(batch, res, mask, pos, consume, tails)

    def close(self) -> None:
        del self.model


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

