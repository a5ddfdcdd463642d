"""The papers' training modes as small pieces around the GRPO loop (``GRPOTrainer(..., modes=[...])``).

- Reasoning Arena and JURY-RL need no mode: pass the ``arena`` or ``proof-gate`` scorer (and ``loss=cispo``
  for Reasoning Arena's optimiser); the loop logs their routed and non-diverse fractions and judge calls.
- ``RaroShared``: RARO's shared LLM (Algorithm 2, App. C.1). The policy is also the critic: policy
  rewards come from the policy model judging (expert, policy) pairs, and critic rollouts (Mix of current
  and replayed pairs) are trained in the same batch; J_pol and J_crit are each averaged on their own,
  then weighted lambda_pol / lambda_crit. ``critic_step`` trains the critic side alone on given pairs.
- ``GarJoint``: GAR's stage 2, joint GRPO (sec. 3). A second model, the discriminator (stage 1:
  ``rewardkit.grpo.sft``), samples analysis-**YES/NO**-rationale judgments of every slice; their binary
  r^s give the reasoner R^rea = lambda1 R^m + lambda2 R^s, and the same judgments, with judgments of as
  many reference slices, are the discriminator's own GRPO rollouts, rewarded with R^dis = lambda3 R^d +
  lambda4 R^a per judgment (``rewardkit.gar.rewards.judgment_rewards``).

Each mode takes its options as a frozen ``Options`` dataclass (``Mode(options)`` or ``Mode(**fields)``, as
scorers do); ``scorer`` holds its scorer's options. ``train_settings`` are the paper's trainer settings,
applied to every ``TrainConfig`` method setting left unset.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from rewardkit.backends.base import (
    ChatRequest,
    Completion,
    JudgeBackend,
    VerdictRequest,
    VerdictResult,
    continuation_tokens,
    first_tokens_decide,
)
from rewardkit.gar.rewards import R_A_AT_PAPER_LAMBDA4, judgment_rewards
from rewardkit.gar.slices import SliceItem, SliceOptions, SliceScorer
from rewardkit.grpo.trainer import GRPOTrainer, Learner, Rollouts, set_advantages
from rewardkit.options import Options, coerce_options, option, resolve_options
from rewardkit.prompts.gar import DISCRIMINATOR_FORM, VERDICT_CHOICES, VERDICT_PREFIX, discriminator_messages
from rewardkit.raro.critic import (
    CriticItem,
    CriticOptions,
    CriticScorer,
    critic_messages,
    critic_rollout_rewards,
    expert_positions,
)
from rewardkit.raro.replay import CriticExample
from rewardkit.types import Group, GroupScore, Status
from rewardkit.verdicts import parse_yes_no

# ------------------------------------------------------------------------------------------ RARO


@dataclass(frozen=True)
class RaroOptions(Options):
    """RARO shared-LLM options (Table 5, App. C.1); ``scorer`` is the relativistic critic's (its judge is the policy)."""

    lambda_pol: float = option(0.5, "weight of J_pol (Table 5: 1/2 Countdown, 1/9 DeepMath, 1/3 poetry)")
    lambda_crit: float = option(0.5, "weight of J_crit (Table 5: 1/2 Countdown, 8/9 DeepMath, 2/3 poetry)")
    critic_batch: int | None = option(None, "critic prompts per step, Mix(current, replay) (None: as many as policy rollouts)")
    critic_samples: int | None = option(None, "critic rollouts per critic prompt, one GRPO group (None: samples_per_prompt, the paper's one group size)")
    scorer: CriticOptions = option(CriticOptions(), "the critic's options; max_tokens is also the critic rollouts' budget")

    def __post_init__(self) -> None:
        super().__post_init__()
        self._at_least(0, "lambda_pol", "lambda_crit")
        self._at_least(1, "critic_batch", "critic_samples")
        if self.scorer.mode != "generate":
            raise ValueError("option 'mode': RARO's critic rollouts are sampled reasoning: the critic must generate")


def critic_items(examples: Sequence[CriticExample], step: int, seed: int = 0, template: str = "math") -> list[CriticItem]:
    """Critic prompts for given (question, expert, policy answer) triples, the expert's slot seeded by (seed, step)."""
    pos = expert_positions(len(examples), seed, f"critic-batch-{step}")
    out = []
    for ex, p in zip(examples, pos, strict=True):
        a1, a2 = (ex.expert, ex.policy) if p == 1 else (ex.policy, ex.expert)
        out.append(CriticItem(ex, p, critic_messages(ex.question, a1, a2, template), "current"))
    return out


def critic_rollouts(learner: Learner, items: Sequence[CriticItem], samples: int, max_tokens: int,
                    tau_crit: float, seed_key: tuple[int, int]) -> tuple[Rollouts, dict[str, float]]:
    """``samples`` critic rollouts per item from ``learner`` (one GRPO group each; Algorithm 2 line 14),
    rewarded R_crit (line 15; unparseable ones masked), with advantages from the learner's settings."""
    r = learner.sample([it.messages for it in items], samples, seed_key=seed_key, max_new_tokens=max_tokens)
    rewards, statuses, _ = critic_rollout_rewards(r.texts, [it.expert_position for it in items for _ in range(samples)],
                                                  tau_crit, r.finish_reasons())  # a cut-off critic is invalid
    ok = np.array([s is Status.OK for s in statuses]).reshape(len(items), samples)  # [C, K]
    set_advantages(r, rewards.reshape(len(items), samples), ok, learner.config)  # over-length filtered if set
    kept = rewards[r.valid]
    return r, {"critic_rollouts": len(r), "critic_ok_fraction": float(ok.mean()),
               "critic_truncated_fraction": float(np.mean(r.truncated)),
               "critic_reward_mean": float(kept.mean()) if kept.size else math.nan}


def critic_step(learner: Learner, examples: Sequence[CriticExample], step: int, samples: int = 4,
                options: CriticOptions | None = None) -> dict[str, float]:
    """One GRPO step of the RARO critic side alone (Algorithm 2 lines 13-17 with lambda_pol = 0) on given
    (question, expert answer, policy answer) triples: ``samples`` sampled verdicts per pair, rewarded R_crit.

    For judge training on fixed data: ``Learner(TrainConfig(...).resolved(RaroShared.train_settings))``
    gives App. C.1's settings; call this once per batch of triples. ``options`` supplies the critic's
    budget (``max_tokens``), ``tau_crit``, prompt ``template`` and ``seed`` (expert slots). Returns metrics.
    """
    o = options or CriticOptions()
    items = critic_items(examples, step, o.seed, o.template)
    r, metrics = critic_rollouts(learner, items, samples, o.max_tokens, o.tau_crit, seed_key=(step, 1))
    return {**metrics, **learner.update([r])}


class RaroShared:
    """RARO shared-LLM mode: the policy model is its own relativistic critic (Algorithm 2)."""

    Options: ClassVar[type[RaroOptions]] = RaroOptions
    # App. C.1 and Table 4: no advantage normalisation, no length normalisation (Dr. GRPO), clip [0.2, 0.28],
    # KL coefficient 1e-3, over-length filtering of policy and critic rollouts (DAPO).
    train_settings: ClassVar[dict[str, Any]] = {"advantage": "dr_grpo", "norm": "constant", "eps_low": 0.2,
                                                "eps_high": 0.28, "beta": 1e-3, "overlong_filter": True}

    def __init__(self, options: RaroOptions | None = None, /, **fields: Any):
        self.options: RaroOptions = resolve_options(RaroOptions, options, fields, "RaroShared")
        self.critic: CriticScorer | None = None

    def attach(self, trainer: GRPOTrainer) -> None:
        self.critic = CriticScorer(dataclasses.replace(self.options.scorer, judge=trainer.policy))
        trainer.scorer = self.critic  # R_pol from c_theta = the policy's own weights (lines 6-8)
        trainer.policy_weight = self.options.lambda_pol

    def extra_rollouts(self, trainer: GRPOTrainer, groups: list[Group], scores: list[GroupScore],
                       step: int) -> tuple[list[Rollouts], dict[str, float]]:
        o = self.options
        size = o.critic_batch or sum(len(g) for g in groups)
        items = self.critic.critic_batch(groups, size, step)  # Mix(R_new, R); R <- R u R_new (lines 9-12)
        if not items:
            return [], {"critic_rollouts": 0}
        k = o.critic_samples or trainer.config.samples_per_prompt
        r, metrics = critic_rollouts(trainer.learner, items, k, o.scorer.max_tokens, o.scorer.tau_crit, (step, 1))
        r.weight = o.lambda_crit
        return [r], {**metrics, "replay_size": len(self.critic.replay)}

    def after_step(self, trainer: GRPOTrainer, groups: list[Group], scores: list[GroupScore], step: int) -> dict:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {"replay": self.critic.replay.state()} if self.critic is not None else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        from rewardkit.raro.replay import ReplayBuffer

        if "replay" not in state:
            return
        fd, tmp = tempfile.mkstemp(suffix=".json")  # the buffer's own loader restores counters and RNG exactly
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(state["replay"], f)
            buf = ReplayBuffer.load(tmp)
        finally:
            os.unlink(tmp)
        buf.path = self.critic.replay.path
        self.critic.replay = buf


# ------------------------------------------------------------------------------------------- GAR


class SampledJudge(JudgeBackend):
    """A ``Learner``'s model as a judge whose sampled judgments are kept for its own GRPO update.

    ``generate`` samples ``n`` judgments per request with the learner (whatever the request's ``n``: the
    scorer reads the first, the rest complete the request's GRPO group) and keeps their token ids until
    ``take()``; ``verdict_probs`` and token counts are the learner's backend's.
    """

    def __init__(self, learner: Learner, n: int):
        self.learner, self.n = learner, n
        self.model_id = learner.backend.model_id
        self._taken: tuple[list[ChatRequest], Rollouts] | None = None
        self._calls = 0

    def generate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        if not requests:
            return []
        self._calls += 1
        r = self.learner.sample([q.messages for q in requests], self.n, seed_key=(self._calls, 2),
                                max_new_tokens=max(q.max_tokens for q in requests))
        self._taken = (list(requests), r)
        n = self.n
        return [Completion(r.texts[i * n:(i + 1) * n], prompt_tokens=len(r.prompt_ids[i * n]),
                           completion_tokens=sum(len(c) for c in r.completion_ids[i * n:(i + 1) * n]),
                           finish_reasons=r.finish_reasons()[i * n:(i + 1) * n])
                for i in range(len(requests))]

    def verdict_probs(self, requests: Sequence[VerdictRequest]) -> list[VerdictResult]:
        return self.learner.backend.verdict_probs(requests)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.learner.backend.count_tokens(texts)

    def take(self) -> tuple[list[ChatRequest], Rollouts] | None:
        """The last ``generate`` call's requests and sampled judgments (once)."""
        out, self._taken = self._taken, None
        return out


@dataclass(frozen=True)
class GarOptions(Options):
    """GAR joint-training options (sec. 3, 4.1); ``scorer`` is the slice scorer's (its judge is the discriminator)."""

    discriminator: str = option("smollm2", "the discriminator: a model folder (stage 1's output, rewardkit.grpo.sft) or 'smollm2'")
    lr: float = option(1e-6, "the discriminator's AdamW learning rate (sec. 4.1: 1e-6, as the reasoner's)")
    lambda3: float = option(1.0, "weight of R^d in R^dis (sec. 4.1: 1)")
    lambda4: float = option(0.5, f"weight of R^a in R^dis (sec. 4.1: 0.5); {R_A_AT_PAPER_LAMBDA4}")
    m_d: Literal["probability", "verdict"] = option(
        "probability", "M_d(x) in R^d (sec. 3: the probability that slice x is real): probability = the "
                       "discriminator's P(YES) where it wrote its verdict, after its own analysis (one scoring pass "
                       "per judgment); verdict = the hard verdict clipped to [1e-6, 1 - 1e-6]")
    dis_samples: int = option(2, "judgments sampled per slice: one GRPO group of the discriminator (not stated in the paper)")
    dis_update: Literal["grpo", "expected"] = option(
        "grpo", "grpo: GRPO on its sampled judgments (sec. 3); expected: rewardkit's variant, gradient ascent on "
                "R^dis of a bare verdict's P(YES) (R^d of M_d = P(YES), R^a in expectation; m_d=verdict: "
                "P(YES) R(YES) + P(NO) R(NO)), one forward pass per slice, no rollouts")
    scorer: SliceOptions = option(SliceOptions(temperature=1.0), "the slice scorer's options; generate mode samples judgments at its temperature, capped at max_tokens (K = 128)")

    def __post_init__(self) -> None:
        super().__post_init__()
        self._at_least(0, "lambda3", "lambda4")
        self._at_least(0, "lr", strict=True)
        self._at_least(1, "dis_samples")
        if self.scorer.temperature <= 0:
            raise ValueError("option 'temperature': the discriminator's judgments are sampled: must be > 0")


def expected_r_dis(p_yes: Any, is_ref: Sequence[bool], labels: Sequence[bool | None], lambda3: float,
                   lambda4: float, m_d: str) -> Any:
    """[S] expected R^dis of each slice's bare verdict given its P(YES) (a torch tensor, gradients kept), the
    ``expected`` variant's objective terms: m_d=probability: lambda3 (log M_d | log(1 - M_d)) + lambda4 E[R^a]
    with M_d = P(YES) (sec. 3); m_d=verdict: P(YES) R(YES) + P(NO) R(NO), R the hard verdict's R^dis."""
    import torch

    ref_mask = torch.tensor(list(is_ref))  # [S]
    if m_d == "probability":  # R^d's log M_d / log(1 - M_d) of M_d = P(YES), plus the expected R^a
        a_yes, a_no = (torch.tensor(judgment_rewards([v] * len(is_ref), is_ref, labels, 0.0, lambda4),
                                    dtype=p_yes.dtype) for v in (1.0, 0.0))  # [S] lambda4 R^a of YES / NO
        q = p_yes.clamp(1e-6, 1 - 1e-6)
        d = torch.where(ref_mask, torch.log(q), torch.log1p(-q))  # [S] sec. 3's GAN terms
        return lambda3 * d + p_yes * a_yes + (1 - p_yes) * a_no
    r_yes, r_no = (torch.tensor(judgment_rewards([v] * len(is_ref), is_ref, labels, lambda3, lambda4),
                                dtype=p_yes.dtype) for v in (1.0, 0.0))  # [S] R^dis of a YES / NO judgment
    return p_yes * r_yes + (1 - p_yes) * r_no


class GarJoint:
    """GAR joint GRPO (stage 2): a second model judges slices for the reasoner and learns from its own judgments."""

    Options: ClassVar[type[GarOptions]] = GarOptions
    train_settings: ClassVar[dict[str, Any]] = {}  # the reasoner: GRPO as DeepSeekMath states it (the loss's settings)

    def __init__(self, options: GarOptions | None = None, /, **fields: Any):
        self.options: GarOptions = resolve_options(GarOptions, options, fields, "GarJoint")
        self.learner: Learner | None = None

    def attach(self, trainer: GRPOTrainer) -> None:
        o = self.options
        # the discriminator is trained like the reasoner (the same resolved settings) but for its own
        # learning rate; its judgments are capped at K tokens on purpose, so they are never over-length filtered
        cfg = dataclasses.replace(trainer.config, model=o.discriminator, lr=o.lr, temperature=o.scorer.temperature,
                                  max_new_tokens=o.scorer.max_tokens, overlong_filter=False)
        self.learner = Learner(cfg)
        self.judge = SampledJudge(self.learner, o.dis_samples if o.dis_update == "grpo" else 1)
        self.slicer = SliceScorer(dataclasses.replace(o.scorer, judge=self.judge))
        trainer.scorer = self.slicer  # R^rea for the reasoner, r^s from the discriminator's sampled judgments

    def extra_rollouts(self, trainer, groups, scores, step) -> tuple[list[Rollouts], dict[str, float]]:
        return [], {}

    def after_step(self, trainer: GRPOTrainer, groups: list[Group], scores: list[GroupScore], step: int) -> dict:
        """The discriminator's GRPO step on its judgments of the step's generated slices and as many reference slices."""
        o, k = self.options, self.options.dis_samples
        gen, correct = self._generated(groups, scores)
        taken = self.judge.take()
        if o.dis_update == "expected":
            return self._expected_update(gen, correct, self._reference(groups, len(gen), step))
        ref = self._reference(groups, len(gen), step)
        if not gen or not ref:
            return {"dis_skipped": 1.0}  # R^d needs reference AND generated slices (groups need an expert)
        if taken is not None and len(taken[0]) == len(gen):
            gen_roll = taken[1]  # the very judgments that gave the reasoner its r^s
        else:  # logit-mode scoring (a rewardkit variant) samples no judgments: sample them now
            gen_roll = self._judge(gen, (step, 3))
        ref_roll = self._judge(ref, (step, 4))
        metrics: dict[str, float] = {}
        for roll, items, is_ref, labels, name in ((ref_roll, ref, True, [None] * len(ref), "ref"),
                                                  (gen_roll, gen, False, correct, "gen")):
            verdicts = [parse_yes_no(t, f) for t, f in zip(roll.texts, roll.finish_reasons(), strict=True)]
            r_s = [(1.0 if v.label == "YES" else 0.0) if v.ok else None for v in verdicts]  # binary r^s per judgment
            p_real = self._verdict_p_yes(items, roll.texts, r_s) if o.m_d == "probability" else None
            rewards = judgment_rewards(r_s, [is_ref] * len(r_s), [c for c in labels for _ in range(k)], o.lambda3,
                                       o.lambda4, p_real=p_real)
            ok = np.isfinite(rewards).reshape(-1, k)  # [S, G] unparseable judgments are masked
            set_advantages(roll, np.nan_to_num(rewards).reshape(-1, k), ok, self.learner.config)
            roll.weight = 1.0  # R^d = E_ref + E_gen: each set averaged on its own (a balanced set)
            kept = rewards[np.isfinite(rewards)]
            metrics[f"dis_{name}_reward"] = float(kept.mean()) if kept.size else math.nan
            metrics[f"dis_{name}_yes"] = float(np.mean([s == 1.0 for s in r_s]))
            metrics[f"dis_{name}_ok_fraction"] = float(ok.mean())
            if p_real is not None:
                read = [p for p in p_real if p is not None]
                metrics[f"dis_{name}_p_yes"] = float(np.mean(read)) if read else math.nan
        stats = self.learner.update([ref_roll, gen_roll])
        return {**metrics, "dis_slices": len(gen) + len(ref), **{f"dis_{k_}": v for k_, v in stats.items()}}

    def _verdict_p_yes(self, items: list[SliceItem], texts: list[str], r_s: list[float | None]) -> list[float | None]:
        """M_d(x) per judgment (sec. 3): the discriminator's P(YES) vs P(NO) at the place its verdict stands,
        after its own analysis (one scoring pass over every read judgment; None where no verdict was read)."""
        k = self.options.dis_samples
        rows = [i for i, s in enumerate(r_s) if s is not None]
        reqs = []
        for i in rows:
            it = items[i // k]
            at = DISCRIMINATOR_FORM.verdict_start(texts[i])  # where the parser read its verdict (a row with r^s)
            reqs.append(VerdictRequest(discriminator_messages(it.problem, it.text, it.context), VERDICT_CHOICES,
                                       texts[i][:at] + VERDICT_PREFIX))
        out: list[float | None] = [None] * len(r_s)
        for i, res in zip(rows, self.learner.backend.verdict_probs(reqs), strict=True):
            if res.status is Status.OK and len(res.probs) == 2:
                out[i] = float(res.probs[0])
        return out

    def _expected_update(self, gen: list[SliceItem], correct: list[bool | None], ref: list[SliceItem]) -> dict:
        """The ``expected`` variant: one AdamW step on R^dis = mean_ref E + mean_gen E over bare verdicts, where
        a slice's E = lambda3 (log P(YES) | log P(NO)) + lambda4 E[R^a] (M_d = P(YES)), or with m_d=verdict
        P(YES) R(YES) + P(NO) R(NO), R the per-judgment R^dis of a hard **YES** / **NO**. P(YES) is read by
        verdict_probs' rule (``first_tokens_decide``), so it is the number the probability mode's M_d reads."""
        import torch

        from rewardkit.grpo.trainer import completion_logprobs
        from rewardkit.prompts.gar import VERDICT_PREFIX

        if not gen or not ref:
            return {"dis_skipped": 1.0}
        o, b = self.options, self.learner.backend
        items, is_ref = ref + gen, [True] * len(ref) + [False] * len(gen)
        labels = [None] * len(ref) + correct
        rows = []
        for it in items:
            text = b.render(discriminator_messages(it.problem, it.text, it.context), assistant_prefix=VERDICT_PREFIX)
            prompt = b.encode(text)
            conts = [continuation_tokens(b.encode, text, prompt, c) for c in VERDICT_CHOICES]
            if first_tokens_decide(conts):  # P(YES) as the probability mode's M_d reads it (verdict_probs' rule)
                conts = [c[:1] for c in conts]
            rows += [(prompt, c) for c in conts]
        logp, mask, _ = completion_logprobs(b.model, rows, b.tokenizer.pad_token_id, 1.0, b.device)  # [2S, T]
        seq = (logp * mask).sum(-1).view(len(items), 2)  # [S, 2] log P(YES), log P(NO) after the prefix
        p_yes = torch.softmax(seq, -1)[:, 0]  # [S] renormalised over the two verdicts
        ref_mask = torch.tensor(is_ref)  # [S]
        e = expected_r_dis(p_yes, is_ref, labels, o.lambda3, o.lambda4, o.m_d)  # [S]
        objective = e[ref_mask].mean() + e[~ref_mask].mean()  # R^d's two expectations (+ R^a on the generated)
        self.learner.optimizer.zero_grad(set_to_none=True)
        (-objective).backward()
        self.learner.optimizer.step()
        self.learner.sync()
        return {"dis_expected_r_dis": float(objective.detach()), "dis_slices": len(items),
                "dis_ref_p_yes": float(p_yes[ref_mask].mean().detach()),
                "dis_gen_p_yes": float(p_yes[~ref_mask].mean().detach())}

    def _generated(self, groups: list[Group], scores: list[GroupScore]) -> tuple[list[SliceItem], list[bool | None]]:
        """The slices the scorer judged, in its order, with their trace's exact-match correctness (None: unknown)."""
        items, correct = [], []
        for g, s in zip(groups, scores, strict=True):
            em = s.components.get("exact_match") or [math.nan] * len(g)
            for r, per_resp, c in zip(g.responses, s.extra.get("slices", [[] for _ in g.responses]), em, strict=True):
                for j, sl in enumerate(per_resp):
                    ctx = r[: sl["start"]] if self.options.scorer.context and j else ""
                    items.append(SliceItem(g.prompt, sl["text"], ctx))
                    correct.append(None if c is None or math.isnan(c) else bool(c))
        return items, correct

    def _reference(self, groups: list[Group], n: int, step: int) -> list[SliceItem]:
        """Up to ``n`` reference slices from the groups' expert solutions (a seeded draw when there are more)."""
        pool = []
        for g in groups:
            expert = g.expert or ""
            for j, sl in enumerate(self.slicer.slices(expert)):
                pool.append(SliceItem(g.prompt, sl.text, expert[: sl.start] if self.options.scorer.context and j else ""))
        if len(pool) <= n:
            return pool
        pick = np.random.default_rng([self.learner.config.seed, step]).choice(len(pool), n, replace=False)
        return [pool[i] for i in sorted(pick)]

    def _judge(self, items: list[SliceItem], seed_key: tuple[int, int]) -> Rollouts:
        msgs = [discriminator_messages(it.problem, it.text, it.context) for it in items]
        return self.learner.sample(msgs, self.options.dis_samples, seed_key, self.options.scorer.max_tokens)

    def state_dict(self) -> dict[str, Any]:
        if self.learner is None:
            return {}
        return {"model": self.learner.model.state_dict(), "optimizer": self.learner.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "model" in state:
            self.learner.model.load_state_dict(state["model"])
            self.learner.optimizer.load_state_dict(state["optimizer"])
            self.learner.sync()


MODES: dict[str, type] = {"raro": RaroShared, "gar": GarJoint}


def build_mode(name: str, values: dict[str, Any]) -> RaroShared | GarJoint:
    """A mode from its name and ``KEY=VALUE`` options (CLI strings coerced to the declared types): the mode's
    own fields go to its ``Options``, every other one to its scorer's (``scorer``)."""
    if name not in MODES:
        raise ValueError(f"unknown mode {name!r}; known: {', '.join(MODES)}")
    cls = MODES[name]
    own = {f.name for f in dataclasses.fields(cls.Options)} - {"scorer"}
    scorer_cls = type(next(f.default for f in dataclasses.fields(cls.Options) if f.name == "scorer"))
    mine = coerce_options(cls.Options, {k: v for k, v in values.items() if k in own}, f"mode {name!r}")
    theirs = coerce_options(scorer_cls, {k: v for k, v in values.items() if k not in own}, f"mode {name!r}")
    base = cls.Options()
    return cls(dataclasses.replace(base, scorer=dataclasses.replace(base.scorer, **theirs), **mine))
