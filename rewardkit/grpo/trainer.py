"""A minimal GRPO trainer: sample N responses per prompt, score whole groups, advantage, loss, step.

The loop reads top to bottom in ``GRPOTrainer.train_step`` (simple_GRPO / nano-aha-moment are the
models): ``sample`` -> ``scorer.score`` -> group-relative advantages -> ``logprobs`` -> loss -> optimizer
step -> metrics and an atomic checkpoint. The model-side pieces (sampling with token ids, log-probs, the
optimizer step) live in ``Learner``, so a mode can train a second model the same way (GAR's discriminator).
The papers' training modes (``rewardkit.grpo.modes``) plug in through two hooks, ``extra_rollouts`` (more
sequences in the same batch, e.g. RARO's critic rollouts) and ``after_step`` (e.g. GAR's discriminator
update), instead of flags inside the loop.

Each named method brings its own paper's settings (``TrainConfig.resolved``): a setting left unset (None)
takes the mode's paper value, else the advantage's, else the loss's; a value set by hand always wins.

Rollouts are seeded by (seed, step) and prompts are drawn by a seeded permutation per epoch, so a run
killed mid-step resumes from its last checkpoint and redoes exactly that step.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import torch

from rewardkit.backends.hardware import resolve_device, resolve_dtype, train_token_budget
from rewardkit.grpo.checkpoint import MetricsLog, latest_checkpoint, load_state, save_checkpoint
from rewardkit.grpo.losses import mixed_loss
from rewardkit.options import Options, option
from rewardkit.scoring import ADVANTAGES, Scorer, diversity_stats
from rewardkit.types import Cost, Group, GroupScore

# The papers' settings per named method; a TrainConfig field left None takes them (see TrainConfig.resolved).
LOSS_SETTINGS: dict[str, dict[str, Any]] = {
    # DeepSeekMath eq. 3-4 (Shao et al. 2024, as the papers cite GRPO): A = (r - mean) / std, 1/G sum_i 1/|o_i|
    # sum_t (per-sequence normaliser), k3 KL at beta = 0.04 (Sec. 4.2). The paper states no clip range:
    # eps = 0.2 is PPO's (and TRL's / verl's default).
    "grpo": {"advantage": "grpo", "norm": "sequence", "eps_low": 0.2, "eps_high": 0.2, "beta": 0.04,
             "overlong_filter": False},
    # CISPO as Reasoning Arena uses it (eqs. 1-2): 1 / sum_i |y_i| per group, the IS weight clipped to
    # [1 - 1.0, 1 + 2.0] (one-sided, App. "Setups"), std-normalised advantage, no KL term.
    "cispo": {"advantage": "grpo", "norm": "token", "eps_low": 1.0, "eps_high": 2.0, "beta": 0.0,
              "overlong_filter": False},
}
ADVANTAGE_SETTINGS: dict[str, dict[str, Any]] = {
    "grpo": {},
    "dr_grpo": {"norm": "constant"},  # Dr. GRPO drops both the std and the 1/|o_i| length normaliser
    "rloo": {},
}
METHOD_FIELDS = ("advantage", "norm", "eps_low", "eps_high", "beta", "overlong_filter")


@dataclass(frozen=True)
class TrainConfig(Options):
    """Everything a run needs besides the prompts and the scorer (the CLI derives its options from here).

    Fields whose default is None are the method's settings: ``resolved()`` fills them from the papers.
    """

    model: str = option("smollm2", "policy: a local model folder or 'smollm2' (the embedded SmolLM2-135M-Instruct)")
    out_dir: str = option("runs/grpo", "where checkpoints, metrics.jsonl and TensorBoard logs go")
    steps: int = option(10, "optimizer steps to run in total (a resumed run continues up to this number)")
    prompts_per_step: int = option(2, "prompts (groups) per step")
    samples_per_prompt: int = option(4, "N responses sampled per prompt")
    max_new_tokens: int = option(64, "longest response, in tokens")
    temperature: float = option(1.0, "sampling temperature (log-probabilities are taken at the same temperature)")
    top_p: float = option(1.0, "nucleus sampling threshold")
    system_prompt: str | None = option(None, "system message before each prompt (None: the chat template's default)")
    loss: Literal["grpo", "cispo"] = option("grpo", "clipped GRPO (DeepSeekMath) or CISPO (Reasoning Arena eq. 1-2); brings its paper's settings")
    advantage: Literal["grpo", "dr_grpo", "rloo"] | None = option(None, "group-relative advantage estimator (None: the loss's, grpo)")
    norm: Literal["token", "sequence", "constant"] | None = option(None, "loss normaliser: tokens per group (eq. 1), per sequence (DeepSeekMath), constant (Dr. GRPO); None: the method's")
    eps_low: float | None = option(None, "lower clip range of the importance ratio (None: the loss's, 0.2 grpo / 1.0 cispo)")
    eps_high: float | None = option(None, "upper clip range of the importance ratio (None: the loss's, 0.2 grpo / 2.0 cispo)")
    beta: float | None = option(None, "weight of the k3 KL penalty to the frozen initial policy, 0: no reference model (None: the loss's, 0.04 grpo / 0 cispo)")
    lr: float = option(1e-5, "AdamW learning rate")
    weight_decay: float = option(0.0, "AdamW weight decay")
    grad_clip: float = option(1.0, "clip the gradient norm to this (0: no clipping)")
    updates_per_batch: int = option(1, "optimizer steps per sampled batch (mu; >1 makes the clipping bite)")
    overlong_filter: bool | None = option(None, "mask responses cut off at their token budget (DAPO over-length filtering; None: the method's)")
    seed: int = option(0, "seed of prompt order and sampling")
    checkpoint_every: int = option(10, "save a checkpoint every this many steps and at the end (SmolLM2 fp32: 1.6 GB "
                                       "with the AdamW state resuming needs); a kill redoes the steps since")
    keep_checkpoints: int = option(2, "checkpoints kept; all but the newest are cut to weights only (0.54 GB)")
    device: str = option("auto", "torch device: auto (cuda when torch sees a GPU, else cpu), cpu, cuda, cuda:1")
    dtype: Literal["auto", "float32", "bfloat16"] = option("auto", "policy weights' dtype (auto: float32: AdamW on "
                                                                   "bf16 weights rounds small updates away)")
    num_threads: int | None = option(None, "torch CPU threads (process-wide; 1 is fastest on a busy shared CPU)")
    train_tokens: int | None = option(None, "tokens (rows x padded width) one forward and backward pass of an update "
                                            "holds, the gradient summed over passes; None: sized from the free memory "
                                            "on a GPU, the whole batch in one pass on a CPU")
    tensorboard: bool = option(True, "also write TensorBoard scalars when tensorboard is installed")
    sampler: Literal["auto", "vllm", "transformers"] = option(
        "auto", "where rollouts are sampled: vllm (an engine in this process, the policy's weights loaded into it "
                "after every step), transformers (the policy itself); auto: vllm when vLLM imports, runs on this "
                "device and the policy fits, else transformers")
    vllm_memory: float = option(0.3, "sampler=vllm on a GPU: the engine's share of GPU memory (gpu_memory_utilization; "
                                     "the rest is the policy's, its gradients and AdamW state)")
    vllm_sleep: bool = option(True, "sampler=vllm on a GPU: the engine sleeps while the policy trains (enable_sleep_mode, "
                                    "level 2: its weights and KV cache freed, reloaded by the sync)")

    def __post_init__(self) -> None:
        super().__post_init__()
        self._at_least(1, "steps", "prompts_per_step", "samples_per_prompt", "max_new_tokens", "updates_per_batch",
                       "checkpoint_every", "keep_checkpoints", "train_tokens")
        self._at_least(0, "temperature", "lr", strict=True)
        self._at_least(0, "beta", "eps_low", "eps_high", "weight_decay", "grad_clip")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"option 'top_p': must be in (0, 1], got {self.top_p}")
        if not 0 < self.vllm_memory < 1:
            raise ValueError(f"option 'vllm_memory': must be in (0, 1), got {self.vllm_memory}")

    def resolved(self, *presets: Mapping[str, Any]) -> TrainConfig:
        """This config with every unset method setting filled: from ``presets`` first (a mode's paper
        settings, in order), then the advantage's paper, then the loss's. Values set by hand are kept.

        >>> c = TrainConfig(loss="cispo").resolved()
        >>> (c.eps_low, c.eps_high, c.beta, c.norm)
        (1.0, 2.0, 0.0, 'token')
        >>> TrainConfig(advantage="dr_grpo").resolved().norm, TrainConfig(advantage="dr_grpo", norm="token").resolved().norm
        ('constant', 'token')
        """
        chosen = {k: getattr(self, k) for k in METHOD_FIELDS if getattr(self, k) is not None}
        for preset in presets:
            unknown = set(preset) - set(METHOD_FIELDS)
            if unknown:
                raise ValueError(f"method settings {sorted(unknown)} are not among {list(METHOD_FIELDS)}")
            for k, v in preset.items():
                chosen.setdefault(k, v)
        advantage = chosen.setdefault("advantage", LOSS_SETTINGS[self.loss]["advantage"])
        for k, v in {**LOSS_SETTINGS[self.loss], **ADVANTAGE_SETTINGS[advantage]}.items():
            chosen.setdefault(k, v)
        return dataclasses.replace(self, **chosen)

    @property
    def is_resolved(self) -> bool:
        return all(getattr(self, k) is not None for k in METHOD_FIELDS)


@dataclass
class Rollouts:
    """Sampled sequences of one batch: token ids, texts, which group each row belongs to, and the loss weight.

    The rows of one ``Rollouts`` form one objective: the trainer averages it on its own and weights it by
    ``weight`` (RARO's lambda_pol / lambda_crit), whatever the other objectives' row counts.
    """

    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]
    texts: list[str]
    truncated: list[bool]  # hit the token budget without an end-of-sequence token
    group: list[int]
    advantages: np.ndarray | None = None  # [B], set once the rewards are known
    valid: np.ndarray | None = None  # [B] bool: the row may be learnt from (status ok, not filtered)
    weight: float = 1.0  # loss weight of this objective (RARO's lambda_pol / lambda_crit)
    max_tokens: int | None = None  # the token budget it was sampled with (the constant normaliser; None: config's)
    sampler_logprobs: list[list[float]] | None = None  # per token, as the sampler drew it (vLLM); compared, never learnt from

    def __len__(self) -> int:
        return len(self.texts)

    def finish_reasons(self) -> list[str]:
        """Per row, as backends report it: ``length`` (cut at the budget) or ``stop``; verdict parsers read a
        cut-off judgment as invalid."""
        return ["length" if t else "stop" for t in self.truncated]


class TrainingMode(Protocol):
    """A training mode around the loop: more rollouts in the same batch, and/or work after each step.

    ``train_settings`` are its paper's trainer settings (``TrainConfig.resolved`` presets); a mode with an
    ``attach(trainer)`` method may supply the scorer.
    """

    train_settings: Mapping[str, Any]

    def extra_rollouts(self, trainer: GRPOTrainer, groups: list[Group], scores: list[GroupScore],
                       step: int) -> tuple[list[Rollouts], dict[str, float]]: ...

    def after_step(self, trainer: GRPOTrainer, groups: list[Group], scores: list[GroupScore],
                   step: int) -> dict[str, float]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class Learner:
    """One causal LM under GRPO: sampling with token ids, per-token log-probs, optimizer steps.

    The trainer's policy is one; a mode trains a second model the same way (GAR's discriminator). The model
    is loaded through the judge backend class, so the very same weights can also judge (``backend``). On a GPU
    the float32 weights sample from a bfloat16 copy (``Placement.sample_dtype``), refreshed after each update.
    """

    def __init__(self, config: TrainConfig):
        from rewardkit.backends.transformers_backend import TransformersBackend

        if not config.is_resolved:
            config = config.resolved()
        self.config = config
        device = resolve_device(config.device)
        # built directly, never from the shared backend cache: these weights are trained
        self.backend = TransformersBackend(config.model, dtype=resolve_dtype(config.dtype, device, training=True),
                                           device=device, num_threads=config.num_threads, sample_dtype="auto")
        self.model, self.tokenizer, self.device = self.backend.model, self.backend.tokenizer, self.backend.device
        self.ref_model = None
        if config.beta > 0:
            self.ref_model = type(self.model).from_pretrained(self.model.name_or_path, dtype=self.model.dtype)
            self.ref_model.to(self.device).eval().requires_grad_(False)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        from rewardkit.grpo.samplers import choose_sampler, make_sampler

        engine_bytes = sum(p.numel() for p in self.model.parameters()) * self.model.dtype.itemsize
        self.sampler = make_sampler(choose_sampler(config.sampler, str(self.device), engine_bytes, config.vllm_memory),
                                    self.backend, config)
        if self.sampler.name != "transformers":
            self.backend.drop_sampling_copy()  # another engine samples: the bf16 copy is never made

    def sync(self) -> None:
        """Bring the sampler's weights in step with the policy's (after an optimizer step or a load)."""
        self.sampler.sync(self.model)

    def sample(self, chats: Sequence[list[dict[str, str]]], n: int, seed_key: tuple[int, int],
               max_new_tokens: int | None = None) -> Rollouts:
        """``n`` sampled continuations per chat (rows chat-major) through the learner's sampler
        (``rewardkit.grpo.samplers``: the policy itself, or a colocated vLLM engine in step with it)."""
        cfg, b = self.config, self.backend
        prompts = b.encode_many(b.render_many(chats))
        limit = max_new_tokens or cfg.max_new_tokens
        samples = self.sampler.sample(prompts, n, limit, cfg.temperature, cfg.top_p,
                                      seed=(cfg.seed * 1_000_003 + seed_key[0] * 7_919 + seed_key[1]) % 2**31)
        texts = self.tokenizer.batch_decode([toks for toks, _, _ in samples], skip_special_tokens=True)
        r = Rollouts([], [], [], [], [], max_tokens=limit)
        for row, ((toks, ended, _), text) in enumerate(zip(samples, texts, strict=True)):
            r.prompt_ids.append(prompts[row // n])
            r.completion_ids.append(toks)  # through the end-of-sequence token, which is an action
            r.texts.append(text)
            r.truncated.append(not ended)
            r.group.append(row // n)
        if all(lp is not None for _, _, lp in samples):
            r.sampler_logprobs = [lp for _, _, lp in samples]
        return r

    def logprobs(self, model: Any, parts: Sequence[Rollouts],
                 batches: list[list[int]] | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-token log pi(a_t | ...) of every completion token of ``parts`` at the sampling temperature:
        [B, T] log-probs, [B, T] token mask, [B, T] entropies (detached); in one pass, or one per row batch of
        ``batches`` (``update_batches``) put back in row order (call it without grad then)."""
        rows = rollout_rows(parts)
        if batches is None or len(batches) == 1:
            return completion_logprobs(model, rows, self.tokenizer.pad_token_id, self.config.temperature, self.device)
        t_max = max(max((len(c) for _, c in rows), default=1), 1)
        out = [torch.zeros(len(rows), t_max, device=self.device), torch.zeros(len(rows), t_max, dtype=torch.bool,
               device=self.device), torch.zeros(len(rows), t_max, device=self.device)]  # [B, T] each
        for batch in batches:
            idx = torch.tensor(batch, device=self.device)
            got = completion_logprobs(model, [rows[i] for i in batch], self.tokenizer.pad_token_id,
                                      self.config.temperature, self.device)
            for whole, part in zip(out, got, strict=True):
                whole[idx, : part.shape[1]] = part.to(whole.dtype)  # a batch's T is its own longest completion
        return out[0], out[1], out[2]

    def update_batches(self, parts: Sequence[Rollouts]) -> list[list[int]]:
        """Row batches of an update's forward and backward passes: the whole batch when its padded size fits
        the token budget (``train_tokens``; on a GPU, without it, sized from the memory free now), else
        length-sorted runs within it. Widths count prompt + completion; left-padding to the batch's longest
        prompt can add to that (the budget's fraction leaves room)."""
        rows = rollout_rows(parts)
        budget = self.config.train_tokens or self._free_token_budget()
        padded = len(rows) * (max(len(p) for p, _ in rows) + max(max(len(c) for _, c in rows), 1))
        if budget is None or padded <= budget:
            return [list(range(len(rows)))]
        from rewardkit.backends.transformers_backend import token_batches

        width = lambda i: len(rows[i][0]) + len(rows[i][1])  # noqa: E731
        return token_batches(sorted(range(len(rows)), key=width), width, budget)

    def _free_token_budget(self) -> int | None:
        """On a GPU, ``train_token_budget`` of the memory free now (the allocator's cached blocks count as free)
        less the gradients and AdamW moments still to be made; None on a CPU (one pass)."""
        if not str(self.device).startswith("cuda"):
            return None
        free, _ = torch.cuda.mem_get_info(self.device)
        free += torch.cuda.memory_reserved(self.device) - torch.cuda.memory_allocated(self.device)
        params = list(self.model.parameters())
        pending = sum(p.numel() * p.element_size() for p in params if p.grad is None)  # gradients to come
        if not self.optimizer.state:  # AdamW makes its two moments at its first step
            pending += 2 * sum(p.numel() * p.element_size() for p in params)
        return train_token_budget(self.model.config, self.backend.dtype, free - pending)

    def _backward_in_batches(self, parts: Sequence[Rollouts], batches: list[list[int]], grad: torch.Tensor) -> None:
        """Accumulate d loss / d theta = sum_rows (d loss / d log pi) . (d log pi / d theta) one row batch at a
        time: ``grad`` [B, T] is the loss's gradient with respect to the log-probabilities (taken on a no-grad
        pass), so any objective of them gets its exact gradient while one batch's activations are held."""
        rows = rollout_rows(parts)
        for batch in batches:
            logp, _, _ = completion_logprobs(self.model, [rows[i] for i in batch], self.tokenizer.pad_token_id,
                                             self.config.temperature, self.device)  # [b, T_b]
            idx = torch.tensor(batch, device=self.device)
            (logp * grad[idx, : logp.shape[1]]).sum().backward()

    def update(self, parts: Sequence[Rollouts]) -> dict[str, float]:
        """``updates_per_batch`` optimizer steps on sum_k weight_k * objective_k (each averaged on its own)."""
        cfg = self.config
        parts = [r for r in parts if len(r)]
        if not parts:
            return {}
        adv = torch.tensor(np.concatenate([r.advantages for r in parts]), dtype=torch.float32, device=self.device)  # [B]
        valid = torch.tensor(np.concatenate([r.valid for r in parts]), device=self.device)  # [B] bool
        part = torch.tensor([k for k, r in enumerate(parts) for _ in range(len(r))], device=self.device)  # [B]
        offsets = np.cumsum([0] + [max(r.group) + 1 for r in parts])
        group = torch.tensor([offsets[i] + g for i, r in enumerate(parts) for g in r.group], device=self.device)  # [B]
        weights = [r.weight for r in parts]
        budgets = [r.max_tokens or cfg.max_new_tokens for r in parts]
        self.sampler.release()  # a sleeping engine frees its GPU memory while the policy trains
        self.optimizer.zero_grad(set_to_none=True)
        batches = self.update_batches(parts)
        ref_logp = old_logp = None
        if self.ref_model is not None:
            with torch.no_grad():
                ref_logp = self.logprobs(self.ref_model, parts, batches)[0]  # [B, T]
        if cfg.updates_per_batch > 1:
            with torch.no_grad():
                old_logp = self.logprobs(self.model, parts, batches)[0]  # [B, T] pi_old, fixed over the mu updates
        stats: dict[str, float] = {}
        for k in range(cfg.updates_per_batch):
            self.optimizer.zero_grad(set_to_none=True)
            if len(batches) == 1:
                logp, tmask, entropy = self.logprobs(self.model, parts)  # [B, T] each
            else:  # the loss on a no-grad pass, its gradient taken back through one row batch at a time
                with torch.no_grad():
                    logp, tmask, entropy = self.logprobs(self.model, parts, batches)
                logp.requires_grad_(True)
            if k == 0:
                stats_mismatch = sampler_mismatch(parts, logp.detach(), tmask)
            mask = tmask & valid[:, None]  # [B, T] real tokens of learnable rows
            old = logp.detach() if old_logp is None else old_logp  # [B, T]
            loss, st = mixed_loss(cfg.loss, logp, old, adv, mask, part, weights, eps_low=cfg.eps_low,
                                  eps_high=cfg.eps_high, ref_logp=ref_logp, beta=cfg.beta, norm=cfg.norm,
                                  group=group, max_tokens=budgets)
            loss.backward()
            if len(batches) > 1:
                self._backward_in_batches(parts, batches, logp.grad)
            norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip if cfg.grad_clip > 0 else math.inf)
            self.optimizer.step()
            n_tok = tmask.sum().clamp(min=1)
            stats = {"loss": float(loss.detach()), "grad_norm": float(norm), **st,
                     "entropy": float((entropy * tmask).sum() / n_tok)}
        t_sync = time.perf_counter()
        self.sync()
        return {**stats, **stats_mismatch, "sync_seconds": time.perf_counter() - t_sync}

    def load_weights(self, ckpt: Path) -> None:
        """Load a checkpoint folder's safetensors weights into the model (strict but for tied weights)."""
        from safetensors.torch import load_file

        files = [ckpt / "model.safetensors"] if (ckpt / "model.safetensors").exists() else \
            sorted(ckpt.glob("model-*.safetensors"))  # save_pretrained shards bigger models
        weights = {k: v for f in files for k, v in load_file(str(f)).items()}
        res = self.model.load_state_dict(weights, strict=False)
        tied = set(getattr(self.model, "_tied_weights_keys", None) or []) | {"lm_head.weight"}
        if res.unexpected_keys or set(res.missing_keys) - tied:
            raise RuntimeError(f"checkpoint {ckpt} does not fit the model: missing {res.missing_keys}, "
                               f"unexpected {res.unexpected_keys}")
        self.sync()


def sampler_mismatch(parts: Sequence[Rollouts], logp: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """How far the sampler's log-probabilities of the sampled tokens are from the policy's (the learner's
    pi_old at the first update): max and mean |difference| over the tokens, {} when the sampler reports none."""
    if any(r.sampler_logprobs is None for r in parts):
        return {}
    rows = [lp for r in parts for lp in r.sampler_logprobs]
    samp = torch.tensor([lp + [0.0] * (logp.shape[1] - len(lp)) for lp in rows], dtype=logp.dtype,
                        device=logp.device)  # [B, T]
    diff = (samp - logp).abs()[mask]  # [tokens]
    if not diff.numel():
        return {}
    return {"sampler_logp_diff_max": float(diff.max()), "sampler_logp_diff_mean": float(diff.mean())}


def rollout_rows(parts: Sequence[Rollouts]) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, completion ids) of every row of ``parts``, in order."""
    return [(p, c) for r in parts for p, c in zip(r.prompt_ids, r.completion_ids, strict=True)]


def completion_logprobs(model: Any, rows: Sequence[tuple[list[int], list[int]]], pad_id: int,
                        temperature: float = 1.0, device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """log pi(c_t | p, c_<t) of every completion token of (prompt ids, completion ids) rows: [B, T] log-probs,
    [B, T] token mask, [B, T] entropies (detached), at ``temperature``.

    Prompts are left-padded so every completion starts at the same column P: only the last T + 1 columns'
    logits are computed (``logits_to_keep``), never a [B, P + T, V] tensor.
    """
    t_max = max(max((len(c) for _, c in rows), default=1), 1)  # T
    p_max = max(len(p) for p, _ in rows)  # P
    ids = torch.tensor([[pad_id] * (p_max - len(p)) + p + c + [pad_id] * (t_max - len(c)) for p, c in rows],
                       device=device)  # [B, P + T]: prompts end at column P - 1, completions fill P .. P + T - 1
    attn = torch.tensor([[0] * (p_max - len(p)) + [1] * (len(p) + len(c)) + [0] * (t_max - len(c))
                         for p, c in rows], device=device)  # [B, P + T] 1 on real tokens
    pos = (attn.cumsum(-1) - 1).clamp(min=0)  # [B, P + T] positions count real tokens only (as generate does)
    logits = model(input_ids=ids, attention_mask=attn, position_ids=pos,
                   logits_to_keep=t_max + 1).logits  # [B, T + 1, V]: columns P - 1 .. P + T - 1
    logits = logits[:, :-1].float() / temperature  # [B, T, V]: column t predicts completion token t
    logp_all = torch.log_softmax(logits, -1)  # [B, T, V]
    targets = ids[:, p_max:]  # [B, T] the completion tokens
    logp = logp_all.gather(-1, targets[..., None]).squeeze(-1)  # [B, T] log pi(c_t | p, c_<t)
    mask = torch.tensor([[t < len(c) for t in range(t_max)] for _, c in rows], device=device)  # [B, T]
    with torch.no_grad():
        entropy = -(logp_all.exp() * logp_all).sum(-1)  # [B, T]
    return logp, mask, entropy


class GRPOTrainer:
    """Train ``config.model`` on ``prompts`` (Groups without responses) with rewards from ``scorer``.

    A mode with an ``attach(trainer)`` method may supply the scorer itself (RARO's critic is the policy);
    the modes' ``train_settings`` fill the method settings left unset in ``config``.
    """

    def __init__(self, config: TrainConfig, prompts: Sequence[Group], scorer: Scorer | None = None,
                 modes: Sequence[TrainingMode] = ()):
        if not prompts:
            raise ValueError("GRPOTrainer: no prompts to train on")
        self.modes = list(modes)
        self.config = config.resolved(*(getattr(m, "train_settings", {}) for m in self.modes))
        self.prompts, self.scorer = list(prompts), scorer
        self.learner = Learner(self.config)
        self.policy = self.learner.sampler.judge  # the policy as a judge (RARO's shared LLM): vLLM's engine if it samples
        self.model, self.tokenizer = self.learner.model, self.learner.tokenizer
        self.ref_model, self.optimizer = self.learner.ref_model, self.learner.optimizer
        self.out_dir = Path(config.out_dir)
        self.log = MetricsLog(self.out_dir, config.tensorboard)
        self.step = 0
        self.history: list[dict[str, Any]] = []
        self.policy_weight = 1.0  # loss weight of the policy rollouts (RARO's lambda_pol)
        for mode in self.modes:
            if hasattr(mode, "attach"):
                mode.attach(self)
        if self.scorer is None:
            raise ValueError("GRPOTrainer: no scorer given and no mode supplied one")
        self._resume()

    # ------------------------------------------------------------------------------------ the loop
    def train(self, on_step: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
        """Run (or resume) up to ``config.steps`` steps; returns every step's metrics row."""
        try:
            while self.step < self.config.steps:
                row = self.train_step()
                self.step += 1
                if self.step % self.config.checkpoint_every == 0 or self.step == self.config.steps:
                    self.save(row)
                self.log.write(row)
                self.history.append(row)
                if on_step is not None:
                    on_step(row)
        finally:
            self.log.close()
        return self.history

    def close(self) -> None:
        """Shut the samplers' engines down, the policy's and a mode's own learner's (GAR's discriminator): a vLLM
        engine holds memory and threads until then."""
        self.learner.sampler.close()
        for mode in self.modes:
            own = getattr(mode, "learner", None)
            if own is not None and own.sampler is not self.learner.sampler:
                own.sampler.close()

    def train_step(self) -> dict[str, Any]:
        """One GRPO step: sample, score whole groups, advantages, loss, optimizer step. Returns metrics."""
        cfg, step, t0 = self.config, self.step, time.perf_counter()
        batch = self.batch_prompts(step)
        rollouts = self.sample([self.chat(g.prompt) for g in batch], cfg.samples_per_prompt, seed_key=(step, 0))
        groups = [dataclasses.replace(g, responses=rollouts.texts[i * cfg.samples_per_prompt:(i + 1) * cfg.samples_per_prompt])
                  for i, g in enumerate(batch)]
        t_sample = time.perf_counter()
        scores = self.scorer.score(groups)
        t_score = time.perf_counter()
        self.assign_advantages(rollouts, scores)
        rollouts.weight = self.policy_weight
        parts, mode_metrics = [rollouts], {}
        for mode in self.modes:
            more, m = mode.extra_rollouts(self, groups, scores, step)
            parts += more
            mode_metrics.update(m)
        stats = self.learner.update(parts)
        for mode in self.modes:
            mode_metrics.update(mode.after_step(self, groups, scores, step))
        return {"step": step, **self.reward_metrics(scores, rollouts), **stats, **mode_metrics,
                "sample_seconds": t_sample - t0, "score_seconds": t_score - t_sample,
                "step_seconds": time.perf_counter() - t0}

    # --------------------------------------------------------------------------------- the pieces
    def batch_prompts(self, step: int) -> list[Group]:
        """The prompts of ``step``: a seeded permutation per epoch, walked in order (resume-exact)."""
        p, n = self.config.prompts_per_step, len(self.prompts)
        out = []
        for k in range(step * p, step * p + p):
            epoch, pos = divmod(k, n)
            order = np.random.default_rng([self.config.seed, epoch]).permutation(n)
            out.append(self.prompts[order[pos]])
        return out

    def chat(self, prompt: str) -> list[dict[str, str]]:
        sys = [{"role": "system", "content": self.config.system_prompt}] if self.config.system_prompt else []
        return sys + [{"role": "user", "content": prompt}]

    def sample(self, chats: Sequence[list[dict[str, str]]], n: int, seed_key: tuple[int, int],
               max_new_tokens: int | None = None) -> Rollouts:
        """The policy's ``n`` sampled continuations per chat (``Learner.sample``)."""
        return self.learner.sample(chats, n, seed_key, max_new_tokens)

    def update(self, parts: Sequence[Rollouts]) -> dict[str, float]:
        """The policy's optimizer step(s) on ``parts`` (``Learner.update``)."""
        return self.learner.update(parts)

    def assign_advantages(self, rollouts: Rollouts, scores: Sequence[GroupScore]) -> None:
        """Group-relative advantages over the ok responses; non-ok (and filtered) rows are masked out."""
        rewards = np.stack([s.rewards for s in scores])  # [G, N]
        mask = np.stack([s.mask for s in scores])  # [G, N]
        set_advantages(rollouts, rewards, mask, self.config)


    def reward_metrics(self, scores: Sequence[GroupScore], rollouts: Rollouts) -> dict[str, float]:
        """Reward mean/std over ok responses, ok / routed / non-diverse fractions, judge cost, lengths."""
        r = np.concatenate([s.rewards for s in scores])
        ok = np.isfinite(r)
        cost = Cost.total(s.cost for s in scores)
        lengths = [len(c) for c in rollouts.completion_ids]
        return {
            "reward_mean": float(r[ok].mean()) if ok.any() else math.nan,
            "reward_std": float(r[ok].std()) if ok.any() else math.nan,
            "ok_fraction": float(ok.mean()),
            "non_diverse_fraction": diversity_stats(scores).non_diverse_fraction,
            "routed_fraction": float(np.mean([bool(_group_field(s, "routed")) for s in scores])),
            "judge_calls": cost.judge_calls, "verifier_calls": cost.verifier_calls,
            "response_length": float(np.mean(lengths)), "truncated_fraction": float(np.mean(rollouts.truncated)),
        }

    # --------------------------------------------------------------------------- checkpoint / resume
    def save(self, row: dict[str, Any]) -> Path:
        state = {"last_metrics": row, "config": dataclasses.asdict(self.config)}
        extra = {f"mode{i}": m.state_dict() for i, m in enumerate(self.modes)}
        return save_checkpoint(self.out_dir, self.step, self.model, self.tokenizer, self.optimizer, state, extra,
                               keep=self.config.keep_checkpoints)

    def _resume(self) -> None:
        ckpt = latest_checkpoint(self.out_dir)
        if ckpt is None:
            self.history = self.log.resume(0, None)
            return
        state, payload = load_state(ckpt)
        self.learner.load_weights(ckpt)
        self.optimizer.load_state_dict(payload["optimizer"])
        for i, m in enumerate(self.modes):
            m.load_state_dict(payload["extra"].get(f"mode{i}", {}))
        self.step = int(state["step"])
        self.history = self.log.resume(self.step, state.get("last_metrics"))


def set_advantages(rollouts: Rollouts, rewards: np.ndarray, mask: np.ndarray, config: TrainConfig) -> None:
    """Fill ``rollouts.advantages`` / ``valid`` from [G, N] rewards and ok-mask (rows group-major), with the
    config's estimator; rows cut off at their budget are masked too when ``overlong_filter`` is on."""
    config = config if config.is_resolved else config.resolved()
    mask = mask.copy()
    if config.overlong_filter:
        mask &= ~np.asarray(rollouts.truncated).reshape(mask.shape)  # DAPO over-length filtering
    adv = ADVANTAGES[config.advantage](rewards, mask)  # [G, N]
    rollouts.advantages, rollouts.valid = adv.reshape(-1), mask.reshape(-1)


def _group_field(s: GroupScore, name: str) -> Any:
    """A per-group value, wherever the scorer keeps it (its own field, ``extra`` or ``components``)."""
    for where in (getattr(s, "stats", None), s.extra, s.components):
        if isinstance(where, dict) and name in where:
            return where[name]
    return getattr(s, name, None)
