"""transformers backend (CPU and GPU): padding-aware batched generation and verdict-logit scoring.

Requests are sorted by prompt length and packed into batches of ``batch_size`` so padding is small;
left padding with explicit position ids keeps padded rows numerically identical to unpadded ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

import numpy as np

from rewardkit.backends.base import ChatRequest, Completion, JudgeBackend, VerdictRequest, VerdictResult
from rewardkit.types import Status


class TransformersBackend(JudgeBackend):
    """A local causal LM through transformers.

    Options:
        model: local directory or hub id ("smollm2" = the embedded SmolLM2-135M-Instruct)
        dtype: float32, bfloat16 or float16
        batch_size: rows per forward pass
        device: torch device ("cpu", "cuda")
    """

    def __init__(self, model: str = "smollm2", *, dtype: str = "float32", batch_size: int = 8,
                 device: str = "cpu", max_prompt_tokens: int | None = None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from rewardkit.backends.embedded import ALIASES, EMBEDDED_NAME, embedded_model_path

        path = str(embedded_model_path()) if model in ALIASES else model
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
    def render(self, messages: Sequence[dict[str, str]], assistant_prefix: str = "") -> str:
        """The chat-templated prompt text, ending where the assistant's reply starts (plus a prefix)."""
        text = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
        return text + assistant_prefix

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False).input_ids

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(ids) for ids in self.tokenizer(list(texts), add_special_tokens=False).input_ids]

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
        torch = self.torch
        prompts = [self.encode(self.render(r.messages)) for r in requests]
        out: list[Completion | None] = [None] * len(requests)
        rows: list[tuple[int, int]] = []  # (request index, sample index)
        for i, (r, p) in enumerate(zip(requests, prompts)):
            err = self._too_long(len(p))
            if err:
                out[i] = Completion([], Status.ERROR, len(p), error=err)
            else:
                rows += [(i, s) for s in range(r.n)]
        texts: dict[tuple[int, int], tuple[str, int, str]] = {}

        def params(row: tuple[int, int]) -> tuple:
            r = requests[row[0]]
            return (r.temperature, r.top_p, r.max_tokens, r.seed)

        for key, grp in groupby(sorted(rows, key=params), key=params):
            temperature, top_p, max_tokens, seed = key
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

        order = sorted(first_tok, key=lambda i: len(prompts[i]))
        for batch in self._batches(order):
            ids, mask, pos = self._pad([prompts[i] for i in batch])
            with torch.inference_mode():
                logits = self.model(input_ids=ids, attention_mask=mask, position_ids=pos).logits[:, -1, :]
            logp = torch.log_softmax(logits.float(), -1)
            for k, i in enumerate(batch):
                lp = np.array([logp[k, c[0]].item() for c in conts[i]])
                out[i] = VerdictResult(_normalise(lp), Status.OK, len(prompts[i]))

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

    def _continuation(self, text: str, prompt_ids: list[int], choice: str) -> list[int]:
        full = self.encode(text + choice)
        if full[: len(prompt_ids)] == prompt_ids and len(full) > len(prompt_ids):
            return full[len(prompt_ids):]
        return self.encode(choice)  # tokenisation merged across the boundary: score the choice alone

    def close(self) -> None:
        del self.model


def _normalise(logp: np.ndarray) -> np.ndarray:
    p = np.exp(logp - logp.max())
    return p / p.sum()
