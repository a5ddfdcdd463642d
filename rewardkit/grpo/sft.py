"""GAR's stage 1 (sec. 3, 4.1): supervised fine-tuning of the slice discriminator on a balanced set of YES/NO
slice judgments in its App. B analysis-score-rationale format, with early stopping on a validation split.

    from rewardkit.gar.slices import SliceItem
    from rewardkit.grpo.sft import JudgmentExample, judgment_text, train_discriminator

    ex = [JudgmentExample(SliceItem(problem, slice_text), label, judgment_text(label, analysis, rationale)), ...]
    result = train_discriminator(ex, "smollm2", out_dir="runs/disc-sft", max_steps=60, batch_size=16)
    result.backend.verdict_probs(...)          # the trained discriminator, ready to judge
    GarJoint(discriminator="runs/disc-sft")    # stage 2 starts from it

Each example is a prompt-completion pair: the prompt is the discriminator's chat (``discriminator_messages``:
App. B system prompt, problem, optional context, slice), the completion is the target judgment (with the
chat template's end of turn), and the loss is the token-mean negative log-likelihood of the completion only.
The paper's optimiser settings are the defaults (``SFTOptions``); early stopping keeps the weights of the
best validation loss. The loop is written here rather than run by TRL's ``SFTTrainer``: TRL 1.16 computes
its loss through a fused, vocabulary-tiled LM head whose CPU fallback spent 4 s per step on a 2-layer,
32-wide toy model (cProfile), where this loop takes milliseconds; the log-probs are the trainer's own
(``completion_logprobs``), the schedule is transformers' ``get_scheduler``.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import numpy as np

from rewardkit.gar.slices import SliceItem
from rewardkit.options import Options, option, resolve_options
from rewardkit.prompts.gar import discriminator_messages
from rewardkit.verdicts import parse_yes_no

T = TypeVar("T")


@dataclass(frozen=True)
class JudgmentExample:
    """One SFT example: a slice to judge, its label (True: sound, **YES**) and the target judgment text."""

    item: SliceItem
    label: bool
    target: str  # the discriminator's reply: brief analysis, **YES** / **NO**, brief rationale (App. B)

    def __post_init__(self) -> None:
        v = parse_yes_no(self.target)
        want = "YES" if self.label else "NO"
        if not v.ok or v.label != want:
            raise ValueError(f"target judgment must state **{want}** first (label {self.label}); "
                             f"parsed {v.label or v.status.value}: {self.target[:120]!r}")


def judgment_text(label: bool, analysis: str = "", rationale: str = "") -> str:
    """A target in the App. B format: the brief analysis, then **YES** / **NO**, then the brief rationale.

    >>> judgment_text(False, "The sum 2 + 3 is written as 6.", "2 + 3 = 5, not 6.")
    'The sum 2 + 3 is written as 6.\\n\\n**NO**\\n\\n2 + 3 = 5, not 6.'
    """
    return "\n\n".join(p for p in (analysis.strip(), "**YES**" if label else "**NO**", rationale.strip()) if p)


def balanced_sample(items: Sequence[T], label: Callable[[T], Hashable], seed: int = 0,
                    per_class: int | None = None) -> list[T]:
    """Down-sample every class to the size of the smallest (or to ``per_class``), seeded; input order kept.

    GAR (sec. 4.1): "we downsample the majority class to achieve a 1:1 label ratio".
    """
    by: dict[Hashable, list[int]] = {}
    for i, it in enumerate(items):
        by.setdefault(label(it), []).append(i)
    if not by:
        return []
    n = min(len(v) for v in by.values())
    if per_class is not None:
        n = min(n, per_class)
    rng = random.Random(seed)
    keep = {i for k in sorted(by, key=str) for i in rng.sample(by[k], n)}
    return [it for i, it in enumerate(items) if i in keep]


def balanced(examples: Sequence[JudgmentExample], seed: int = 0) -> list[JudgmentExample]:
    """Down-sample the majority label to a 1:1 YES:NO ratio (sec. 4.1), a seeded draw; order kept. Without
    both labels nothing is balanced: empty.

    >>> ex = [JudgmentExample(SliceItem("p", str(i)), i < 3, judgment_text(i < 3)) for i in range(5)]
    >>> sorted(e.label for e in balanced(ex))
    [False, False, True, True]
    """
    if len({e.label for e in examples}) < 2:
        return []
    return balanced_sample(examples, lambda e: e.label, seed)


def hold_out_problems(examples: Sequence[JudgmentExample], eval_fraction: float,
                     seed: int = 0) -> tuple[list[JudgmentExample], list[JudgmentExample]]:
    """(train, validation): a seeded ``eval_fraction`` of the problems, with all their slices, is held out,
    so no problem is on both sides."""
    problems = sorted({e.item.problem for e in examples})
    n_eval = min(max(1, round(eval_fraction * len(problems))), len(problems) - 1)
    held = set(np.random.default_rng(seed).choice(len(problems), n_eval, replace=False).tolist())
    held_problems = {problems[i] for i in held}
    return ([e for e in examples if e.item.problem not in held_problems],
            [e for e in examples if e.item.problem in held_problems])


@dataclass(frozen=True)
class SFTOptions(Options):
    """Stage 1 settings: the optimiser is sec. 4.1's; the validation split and early stopping are rewardkit's."""

    lr: float = option(1e-4, "AdamW learning rate (sec. 4.1: 1e-4)")
    weight_decay: float = option(1e-4, "AdamW weight decay (sec. 4.1: 1e-4)")
    max_steps: int = option(500, "optimizer steps at most (sec. 4.1: 500)")
    warmup_fraction: float = option(0.2, "share of max_steps spent warming the learning rate up (sec. 4.1: 100 of 500)")
    batch_size: int = option(128, "examples per optimizer step (sec. 4.1: global batch 128)")
    micro_batch_size: int = option(8, "examples per forward pass (batch_size / micro_batch_size accumulation steps)")
    scheduler: Literal["linear", "cosine", "constant_with_warmup"] = option("linear", "learning-rate schedule after warm-up (not stated in the paper)")
    balance: bool = option(True, "down-sample the majority label to 1:1 (sec. 4.1) before splitting")
    eval_fraction: float = option(0.1, "share of problems held out for early stopping (when no eval_examples are given)")
    eval_every: int = option(10, "optimizer steps between validation losses")
    patience: int = option(3, "stop after this many validations without a better loss (early stopping)")
    max_seconds: float | None = option(None, "wall-clock budget: the step that ends past it is validated and training stops (None: no limit)")
    grad_clip: float = option(1.0, "clip the gradient norm to this (not stated in the paper)")
    max_length: int = option(1024, "longest prompt + judgment in tokens (a longer prompt loses its beginning)")
    seed: int = option(0, "seeds balancing, the split, shuffling and initialisation")
    dtype: Literal["auto", "float32", "bfloat16"] = option("auto", "weights' dtype when the model is loaded by name "
                                                                   "(auto: float32, as trained weights need)")
    device: str = option("auto", "torch device when the model is loaded by name (auto: cuda when torch sees a GPU)")
    num_threads: int | None = option(None, "torch CPU threads when the model is loaded by name")

    def __post_init__(self) -> None:
        super().__post_init__()
        self._at_least(0, "lr", strict=True)
        self._at_least(0, "weight_decay", "grad_clip", "max_seconds")
        self._at_least(1, "max_steps", "batch_size", "micro_batch_size", "eval_every", "patience", "max_length")
        if self.batch_size % self.micro_batch_size:
            raise ValueError(f"option 'batch_size': {self.batch_size} is not a multiple of micro_batch_size "
                             f"{self.micro_batch_size}")
        if not 0 <= self.warmup_fraction < 1 or not 0 < self.eval_fraction < 1:
            raise ValueError(f"options 'warmup_fraction' in [0, 1) and 'eval_fraction' in (0, 1) required, got "
                             f"{self.warmup_fraction}, {self.eval_fraction}")


@dataclass
class SFTResult:
    """The fine-tuned discriminator (best validation loss) and how training went."""

    backend: Any  # the TransformersBackend holding the trained weights: judge with it, or save it
    history: list[dict[str, float]]  # one row per logged step: {"step", "loss"} and {"step", "eval_loss"}
    best_step: int  # optimizer step of the kept weights (0: the starting weights were best)
    best_eval_loss: float
    stopped_early: bool
    train_examples: int
    eval_examples: int
    labels: dict[str, int] = field(default_factory=dict)  # YES / NO counts of the training set
    out_dir: str | None = None


def _encode(tokenizer: Any, msgs: list[dict[str, str]], target: str, max_length: int) -> tuple[list[int], list[int]]:
    """(prompt ids, completion ids): the templated chat, then the target reply and its end of turn;
    beyond ``max_length`` tokens the prompt loses its beginning, never the reply."""
    prompt = list(tokenizer.apply_chat_template(msgs, add_generation_prompt=True)["input_ids"])
    full = list(tokenizer.apply_chat_template(msgs + [{"role": "assistant", "content": target}])["input_ids"])
    if full[:len(prompt)] != prompt:  # a template that renders the turn differently once it is complete
        full = prompt + tokenizer(target + (tokenizer.eos_token or ""), add_special_tokens=False).input_ids
    completion = full[len(prompt):][:max_length - 1]
    return prompt[max(0, len(prompt) + len(completion) - max_length):], completion


def train_discriminator(examples: Sequence[JudgmentExample], model: Any = "smollm2",
                        options: SFTOptions | None = None, /, *, eval_examples: Sequence[JudgmentExample] | None = None,
                        out_dir: str | None = None, **fields: Any) -> SFTResult:
    """SFT of the GAR discriminator (stage 1) on (slice item, label, target judgment) examples.

    ``model`` is a model folder / ``"smollm2"`` (loaded fresh) or a ``TransformersBackend`` (trained in
    place). The examples are balanced 1:1 (``balance``), then a held-out share of the problems is the
    validation split unless ``eval_examples`` are given. Validation loss is measured before training and
    every ``eval_every`` steps; training stops after ``patience`` validations without improvement, and the
    best weights are kept. With ``out_dir`` the model and tokenizer are saved there (``save_pretrained``).
    """
    o: SFTOptions = resolve_options(SFTOptions, options, fields, "train_discriminator")
    train = balanced(examples, o.seed) if o.balance else list(examples)
    if eval_examples is None:
        train, held = hold_out_problems(train, o.eval_fraction, o.seed)
    else:
        held = list(eval_examples)
    if not train or not held:
        raise ValueError(f"train_discriminator: {len(train)} training and {len(held)} validation examples "
                         "(both sets need examples; balancing drops the surplus label)")

    def chat(e: JudgmentExample) -> tuple[list[dict[str, str]], str]:
        return discriminator_messages(e.item.problem, e.item.text, e.item.context), e.target

    res = train_sft([chat(e) for e in train], model, o, eval_examples=[chat(e) for e in held], out_dir=out_dir)
    res.labels = {"YES": sum(e.label for e in train), "NO": sum(not e.label for e in train)}
    return res


def train_sft(examples: Sequence[tuple[list[dict[str, str]], str]], model: Any = "smollm2",
              options: SFTOptions | None = None, /, *, eval_examples: Sequence[tuple[list[dict[str, str]], str]],
              out_dir: str | None = None, **fields: Any) -> SFTResult:
    """The SFT loop behind ``train_discriminator`` on any (chat messages, target reply) pairs, e.g. a judge's
    verdict format: the loss is the reply tokens' mean NLL; validation, early stopping, best weights and
    ``out_dir`` as there (``balance`` and ``eval_fraction`` do not apply: the caller gives both sets)."""
    import torch
    from transformers import get_scheduler

    from rewardkit.backends.hardware import resolve_device, resolve_dtype
    from rewardkit.backends.transformers_backend import TransformersBackend
    from rewardkit.grpo.trainer import completion_logprobs

    o: SFTOptions = resolve_options(SFTOptions, options, fields, "train_sft")
    train, held = list(examples), list(eval_examples)
    if not train or not held:
        raise ValueError(f"train_sft: {len(train)} training and {len(held)} validation examples (both sets need examples)")
    device = resolve_device(o.device)
    backend = model if isinstance(model, TransformersBackend) else TransformersBackend(
        model, dtype=resolve_dtype(o.dtype, device, training=True), device=device, num_threads=o.num_threads)
    net, tok, dev = backend.model, backend.tokenizer, backend.device
    pad = tok.pad_token_id
    train_rows = [_encode(tok, m, t, o.max_length) for m, t in train]  # [(prompt ids, completion ids)]
    held_rows = [_encode(tok, m, t, o.max_length) for m, t in held]

    def nll(rows: Sequence[tuple[list[int], list[int]]]) -> tuple[torch.Tensor, int]:
        logp, mask, _ = completion_logprobs(net, rows, pad, 1.0, dev)  # [b, T] each
        return -(logp * mask).sum(), int(mask.sum())  # summed token NLL, tokens

    def validation_loss() -> float:
        with torch.no_grad():
            parts = [nll(held_rows[i:i + o.micro_batch_size]) for i in range(0, len(held_rows), o.micro_batch_size)]
        return float(sum(s for s, _ in parts)) / max(sum(n for _, n in parts), 1)

    torch.manual_seed(o.seed)
    opt = torch.optim.AdamW(net.parameters(), lr=o.lr, weight_decay=o.weight_decay)
    sched = get_scheduler(o.scheduler, opt, num_warmup_steps=round(o.warmup_fraction * o.max_steps),
                          num_training_steps=o.max_steps)
    rng = np.random.default_rng(o.seed)
    order: list[int] = []
    best = validation_loss()
    history = [{"step": 0, "eval_loss": best}]
    best_step, best_state, bad, step = 0, {k: v.detach().clone() for k, v in net.state_dict().items()}, 0, 0
    t0, out_of_time = time.perf_counter(), False
    while step < o.max_steps and bad < o.patience and not out_of_time:
        while len(order) < o.batch_size:  # epochs of seeded permutations
            order += rng.permutation(len(train_rows)).tolist()
        batch, order = [train_rows[i] for i in order[:o.batch_size]], order[o.batch_size:]
        n_tokens = sum(len(c) for _, c in batch)
        total = 0.0
        opt.zero_grad(set_to_none=True)
        for i in range(0, len(batch), o.micro_batch_size):
            s_, _ = nll(batch[i:i + o.micro_batch_size])
            (s_ / n_tokens).backward()  # the token mean over the whole batch, accumulated
            total += float(s_.detach())
        torch.nn.utils.clip_grad_norm_(net.parameters(), o.grad_clip if o.grad_clip > 0 else math.inf)
        opt.step()
        sched.step()
        step += 1
        history.append({"step": step, "loss": total / n_tokens, "learning_rate": sched.get_last_lr()[0]})
        out_of_time = o.max_seconds is not None and time.perf_counter() - t0 >= o.max_seconds
        if step % o.eval_every == 0 or step == o.max_steps or out_of_time:
            loss = validation_loss()
            history.append({"step": step, "eval_loss": loss})
            if loss < best:
                best, best_step, bad = loss, step, 0
                best_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
            else:
                bad += 1
    with torch.no_grad():
        net.load_state_dict(best_state)
    net.eval()
    if out_dir is not None:
        net.save_pretrained(out_dir)
        tok.save_pretrained(out_dir)
    return SFTResult(backend, history, best_step, best, step < o.max_steps, len(train), len(held), {}, out_dir)
