"""transformers backend (CPU and GPU): padding-aware batched generation and verdict-logit scoring.

Requests are sorted by prompt length and packed into batches of ``batch_size`` so padding is small;
left padding with explicit position ids keeps padded rows numerically identical to unpadded ones.
Verdict requests that share a long token prefix (a live tournament: problem + new trace, then three
anchors) encode that prefix once and score only the suffixes against its KV cache.
"""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Sequence
from functools import cache
from itertools import groupby
from pathlib import Path

import numpy as np

from rewardkit.backends.base import (
    ChatRequest,
    Completion,
    HFChatTemplateMixin,
    JudgeBackend,
    TopLogprobs,
    VerdictRequest,
    VerdictResult,
)
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


class TransformersBackend(HFChatTemplateMixin, JudgeBackend):
    """A local causal LM through transformers.

    Options:
        model: local directory or hub id ("smollm2" = the embedded SmolLM2-135M-Instruct)
        dtype: float32, bfloat16, float16 or auto (bf16 where the CPU/GPU supports it)
        batch_size: rows per forward pass
        device: torch device ("cpu", "cuda")
        share_prefix: encode a token prefix shared by several verdict requests once (KV cache)
        min_shared_prefix: shortest shared prefix (tokens) worth re-using
        num_threads: torch CPU threads (process-wide; default $REWARDKIT_TORCH_THREADS, else torch's)
    """

    def __init__(self, model: str = "smollm2", *, dtype: str = "float32", batch_size: int = 8,
                 device: str = "cpu", max_prompt_tokens: int | None = None, share_prefix: bool = True,
                 min_shared_prefix: int = 64, num_threads: int | None = None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from rewardkit.backends.embedded import ALIASES, EMBEDDED_NAME, embedded_model_path

        num_threads = num_threads or int(os.environ.get("REWARDKIT_TORCH_THREADS", 0)) or None
        if num_threads:
            # on oversubscribed CPUs OpenMP spin-waiting makes 2 threads ~10x slower than 1 (measured here)
            torch.set_num_threads(num_threads)
        path = str(embedded_model_path()) if model in ALIASES else model
        dtype = resolve_dtype(dtype, device)
        self.dtype = dtype
        self.share_prefix = share_prefix
        self.min_shared_prefix = min_shared_prefix
        self.lock = threading.RLock()  # one forward at a time when called from several threads (serve-judge)
        self.model_id = f"{EMBEDDED_NAME if model in ALIASES else model}@{dtype}"
        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype)).to(device).eval()
        self.device = device
        self.batch_size = batch_size
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

    def _batches(self, order: list[int]) -> list[list[int]]:
        return [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]

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
            for batch in self._batches(list(range(len(grp)))):
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

        When the choices differ in their first token (A/B/Tie, YES/NO, 1/2/tie) one forward pass per
        prompt suffices: the first token decides. Otherwise each choice's full continuation is scored.
        """
        torch = self.torch
        out: list[VerdictResult | None] = [None] * len(requests)
        prompts, conts = [], []
        for i, r in enumerate(requests):
            text = self.render(r.messages, r.assistant_prefix)
            p = self.encode(text)
            prompts.append(p)
            conts.append([self._continuation(text, p, c) for c in r.choices])
            err = self._too_long(len(p) + max(len(c) for c in conts[-1]))
            if err:
                out[i] = VerdictResult(np.array([]), Status.ERROR, len(p), error=err)
        first_tok = [i for i in range(len(requests)) if out[i] is None
                     and len({c[0] for c in conts[i]}) == len(conts[i])]
        full = [i for i in range(len(requests)) if out[i] is None and i not in set(first_tok)]

        def consume(i: int, logp) -> None:
            lp = np.array([logp[c[0]].item() for c in conts[i]])
            out[i] = VerdictResult(_normalise(lp), Status.OK, len(prompts[i]))

        self._each_last_logprobs(prompts, first_tok, consume)

        # choices sharing a first token: score each full continuation
        seqs = [(i, j) for i in full for j in range(len(conts[i]))]
        seqs.sort(key=lambda ij: len(prompts[ij[0]]) + len(conts[ij[0]][ij[1]]))
        scores: dict[tuple[int, int], float] = {}
        for batch in self._batches(list(range(len(seqs)))):
            items = [seqs[b] for b in batch]
            rows = [prompts[i] + conts[i][j] for i, j in items]
            ids, mask, pos = self._pad(rows)
            with torch.inference_mode():
                logp = torch.log_softmax(self.model(input_ids=ids, attention_mask=mask, position_ids=pos).logits.float(), -1)
            width = ids.shape[1]
            for k, (i, j) in enumerate(items):
                c = conts[i][j]
                start = width - len(c)  # continuation occupies the last len(c) positions
                scores[(i, j)] = float(sum(logp[k, start + t - 1, tok].item() for t, tok in enumerate(c)))
        for i in full:
            lp = np.array([scores[(i, j)] for j in range(len(conts[i]))])
            out[i] = VerdictResult(_normalise(lp), Status.OK, len(prompts[i]))
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

        def consume(i: int, logp) -> None:
            vals, ids = logp.topk(min(k, logp.shape[-1]))
            toks = [(self.tokenizer.decode([t]), float(v)) for t, v in zip(ids.tolist(), vals.tolist(), strict=True)]
            out[i] = TopLogprobs(toks, Status.OK, len(prompts[i]))

        with self.lock:
            self._each_last_logprobs(prompts, valid, consume)
        return out  # type: ignore[return-value]

    # ---------------------------------------------------------------- next-token log-probs, batched
    def _each_last_logprobs(self, prompts: list[list[int]], indices: list[int], consume) -> None:
        """Call ``consume(i, logp)`` with the next-token log-probabilities after ``prompts[i]``.

        Prompts sharing a long prefix are scored against its KV cache (``share_prefix``); the rest go in
        length-sorted, left-padded batches. Only the last position's logits are computed.
        """
        torch = self.torch
        rest = list(indices)
        if self.share_prefix:
            groups, rest = self._prefix_groups(prompts, indices)
            for plen, members in groups:
                self._with_prefix(prompts, plen, members, consume)
        for batch in self._batches(sorted(rest, key=lambda i: len(prompts[i]))):
            ids, mask, pos = self._pad([prompts[i] for i in batch])
            with torch.inference_mode():
                logits = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1).logits
            logp = torch.log_softmax(logits[:, -1, :].float(), -1)
            for k, i in enumerate(batch):
                consume(i, logp[k])

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
                shared = min(common, _lcp(prompts[cur[-1]], p), len(p) - 1)
                if shared >= self.min_shared_prefix and shared >= len(p) // 4:
                    cur.append(i)
                    common = shared
                    continue
                close()
            cur, common = [i], len(p) - 1
        close()
        return groups, rest

    def _with_prefix(self, prompts: list[list[int]], plen: int, members: list[int], consume) -> None:
        """Encode ``prompts[members[0]][:plen]`` once, then each batch of suffixes against its KV cache."""
        torch = self.torch
        with torch.inference_mode():
            prefix = torch.tensor([prompts[members[0]][:plen]], device=self.device)
            base = self.model(input_ids=prefix, use_cache=True, logits_to_keep=1).past_key_values
            for batch in self._batches(sorted(members, key=lambda i: len(prompts[i]))):
                ids, smask, _ = self._pad([prompts[i][plen:] for i in batch])  # suffixes, left-padded
                n = len(batch)
                mask = torch.cat([torch.ones((n, plen), dtype=smask.dtype, device=self.device), smask], 1)
                pos = plen + (smask.cumsum(-1) - 1).clamp(min=0)
                cache = copy.deepcopy(base)
                if n > 1:
                    cache.batch_repeat_interleave(n)
                logits = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache,
                                    logits_to_keep=1).logits
                logp = torch.log_softmax(logits[:, -1, :].float(), -1)
                for k, i in enumerate(batch):
                    consume(i, logp[k])

    def _continuation(self, text: str, prompt_ids: list[int], choice: str) -> list[int]:
        full = self.encode(text + choice)
        if full[: len(prompt_ids)] == prompt_ids and len(full) > len(prompt_ids):
            return full[len(prompt_ids):]
        return self.encode(choice)  # tokenisation merged across the boundary: score the choice alone

    def close(self) -> None:
        del self.model


def _lcp(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _normalise(logp: np.ndarray) -> np.ndarray:
    p = np.exp(logp - logp.max())
    return p / p.sum()
