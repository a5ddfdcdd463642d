"""The one Scorer interface, the scorer registry, and group-relative advantages.

Every scorer takes a batch of groups and returns one GroupScore per group, in order. Scorers gather the
model work of the whole batch and hand it to their backend in one call.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

import numpy as np

from rewardkit.backends import JudgeBackend, load_backend
from rewardkit.options import OptionInfo, Options, coerce_options, option, options_info, resolve_options
from rewardkit.types import Group, GroupScore


@runtime_checkable
class Scorer(Protocol):
    """Scores a batch of groups: ``scorer(groups) -> list[GroupScore]`` (same order, same sizes)."""

    name: ClassVar[str]

    def score(self, groups: Sequence[Group]) -> list[GroupScore]: ...


# ------------------------------------------------------------------------------------------ options

VerdictMode = Literal["auto", "generate", "logit"]  # how a judge's verdict is read: parsed from text, from its probabilities, or auto


def resolve_mode(mode: str, judge: JudgeBackend | str) -> str:
    """``auto`` follows the judge: the backend's ``default_mode`` (``logit`` for the embedded SmolLM2, which
    cannot write the papers' verdict formats; ``generate``, the papers' way, for every other judge)."""
    if mode != "auto":
        return mode
    if isinstance(judge, str):
        from rewardkit.backends.embedded import ALIASES
        from rewardkit.backends.spec import split_spec

        kind, target, _ = split_spec(judge)
        return "logit" if kind in ("transformers", "llamacpp") and target in ALIASES else "generate"
    return getattr(judge, "default_mode", "generate")


@dataclass(frozen=True)
class JudgeOptions(Options):
    """The two options every judge-based scorer shares: which judge, and how its verdict is read."""

    judge: JudgeBackend | str = option("smollm2", "judge backend spec (see rewardkit.backends) or a backend instance")
    mode: VerdictMode = option("auto", "generate (parse the written verdict), logit (the judge's verdict probabilities) or "
                                        "auto (logit for the embedded SmolLM2 judge, generate for any other)")


class BaseScorer:
    """Base of every scorer: holds the frozen ``options``, times the batch and spreads wall seconds over
    the groups' cost records.

    ``Scorer(**fields)`` or ``Scorer(options)`` builds it (``Scorer(options, x=1)`` is
    ``dataclasses.replace(options, x=1)``); subclasses set ``Options`` and read ``self.options``.
    """

    name: ClassVar[str] = ""
    Options: ClassVar[type[Options]] = Options
    # True when a response's reward depends on its group peers (votes, tournaments, routing by diversity):
    # trainers' adapters must then hand it whole groups, never one response at a time
    group_relative: ClassVar[bool] = False

    def __init__(self, options: Options | None = None, /, **fields: Any) -> None:
        self.options = resolve_options(self.Options, options, fields, type(self).__name__)
        self._setup()

    def _setup(self) -> None:
        """Build what the options describe (checkers, verifiers); runs once after ``options`` is set."""

    def score(self, groups: Sequence[Group]) -> list[GroupScore]:
        t0 = time.perf_counter()
        out = self._score(list(groups))
        if len(out) != len(groups):
            raise RuntimeError(f"scorer {self.name!r} returned {len(out)} scores for {len(groups)} groups")
        dt = time.perf_counter() - t0
        for s in out:
            s.cost.seconds += dt / max(len(out), 1)
        return out

    def __call__(self, groups: Sequence[Group]) -> list[GroupScore]:
        return self.score(groups)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.options!r})"

    def _score(self, groups: list[Group]) -> list[GroupScore]:  # pragma: no cover - interface
        raise NotImplementedError


class JudgeScorer(BaseScorer):
    """Base of judge-based scorers: ``options.judge`` (a spec or an instance) becomes ``self.judge``."""

    Options: ClassVar[type[Options]] = JudgeOptions
    _judge: JudgeBackend | None = None

    @property
    def judge(self) -> JudgeBackend:
        """The judge backend, resolved once by ``rewardkit.backends.load_backend`` (the one resolver)."""
        if self._judge is None:
            self._judge = load_backend(self.options.judge)  # type: ignore[attr-defined]
        return self._judge

    @property
    def verdict_mode(self) -> str:
        """``options.mode`` with ``auto`` resolved for this scorer's judge (``resolve_mode``)."""
        return resolve_mode(self.options.mode, self.options.judge)  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class ScorerInfo:
    name: str
    target: str  # "module:Class", imported lazily so listing scorers loads no model code
    description: str


_REGISTRY: dict[str, ScorerInfo] = {}

# Built-in scorers: name -> (import path, one-line description). Modules register here, not by import
# side effects, so `rewardkit scorers` is instant and a missing optional dependency breaks one scorer only.
_BUILTIN: dict[str, tuple[str, str]] = {
    "verifier": ("rewardkit.verifier:VerifierScorer", "Exact final-answer check against the reference (math-verify); the RLVR baseline."),
    # Reasoning Arena
    "arena": ("rewardkit.arena.scorers:ArenaScorer", "Reasoning Arena: verifier reward on diverse groups, trace-tournament Bradley-Terry reward on non-diverse ones (eq. 5)."),
    "tournament": ("rewardkit.arena.scorers:TournamentScorer", "ArenaRL baseline: round-robin trace tournament on every group, no routing; win-rate reward (eq. 8)."),
    "pointwise": ("rewardkit.arena.scorers:PointwiseScorer", "Rubric judge (1 / 0.5 / 0) on every response of every group."),
    "adaptive-pointwise": ("rewardkit.arena.scorers:AdaptivePointwiseScorer", "Rubric judge only on non-diverse groups; verifier reward elsewhere."),
    # JURY-RL
    "proof-gate": ("rewardkit.jury.proof_gate:ProofGateScorer", "JURY-RL: majority answer verified once per group (eq. 4); ResZero when inconclusive (eq. 5)."),
    "majority-vote": ("rewardkit.jury.proof_gate:MajorityVoteScorer", "Label-free majority vote: reward 1 for responses agreeing with the plurality answer."),
    "llm-judge": ("rewardkit.jury.proof_gate:LLMJudgeScorer", "JURY-RL App. D judge, majority only: one judge call per group on the majority answer (gate, then fallback)."),
    "self-certainty": ("rewardkit.jury.self_certainty:SelfCertaintyScorer", "JURY-RL App. D label-free baseline: the policy's cumulative log-probability of the final-answer tokens (over=whole-response: Intuitor's mean KL(U || p_t))."),
    "entropy": ("rewardkit.jury.self_certainty:EntropyScorer", "JURY-RL App. D label-free baseline: minus the policy's mean token entropy over the final-answer tokens (or the whole response)."),
    "llm-judge-rollout": ("rewardkit.jury.rollout_judge:RolloutJudgeScorer", "JURY-RL LLM-as-a-Judge baseline: the App. D judge on every rollout (its reasoning and final answer); reward 1 if True, 0 if False."),
    # GAR
    "slices": ("rewardkit.gar.slices:SliceScorer", "GAR: discriminator judges each reasoning slice; R = l1 * exact match + l2 * slice mean."),
    "holistic": ("rewardkit.gar.holistic:HolisticScorer", "GAR Table 4 baseline: one discriminator call judges the whole trace; R = l1 * exact match + l2 * verdict."),
    # RARO
    "countdown": ("rewardkit.raro.countdown:CountdownScorer", "RARO Countdown (App. C.2): exact verifier of the expression combining the numbers into the target; binary reward."),
    "critic": ("rewardkit.raro.critic:CriticScorer", "RARO: relativistic critic compares each response with the expert answer (tie allowed)."),
    "critic-binary": ("rewardkit.raro.binary_critic:BinaryCriticScorer", "RARO Sec. 3.2 baseline: binary critic labels each response alone expert (+1) or policy (-1), no tie."),
    "code": ("rewardkit.code.execution:CodeScorer", "Execution reward: run each program against its tests (HumanEval, LiveCodeBench) in the sandbox."),
}


def is_group_relative(scorer: Any) -> bool:
    """Whether ``scorer`` rewards a response relative to its group (``BaseScorer.group_relative``)."""
    return bool(getattr(scorer, "group_relative", False))


def register_scorer(name: str, target: str, description: str) -> None:
    """Register a scorer class under ``name`` (``target`` is ``"module:Class"``)."""
    _REGISTRY[name] = ScorerInfo(name, target, description)


for _n, (_t, _d) in _BUILTIN.items():
    register_scorer(_n, _t, _d)


def scorer_names() -> list[str]:
    return sorted(_REGISTRY)


def scorer_class(name: str) -> type:
    try:
        info = _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown scorer {name!r}; known: {', '.join(scorer_names())}") from None
    mod, _, cls = info.target.partition(":")
    if not mod or not cls.isidentifier():  # 'a:b:c', ':X', 'json:' ended in "too many values to unpack" or so
        raise ImportError(f"scorer {name!r}: expected module:Class, a Python module and a class in it")
    try:
        return getattr(importlib.import_module(mod), cls)
    except AttributeError:  # a user's --scorer module:Class naming no class: one error line, not a traceback
        raise ImportError(f"scorer {name!r}: module {mod!r} has no {cls!r}") from None


def scorer_options(name: str) -> list[OptionInfo]:
    """The options of a registered scorer, read from the fields of its ``Options`` dataclass."""
    return options_info(scorer_class(name).Options)


def describe(name: str) -> str:
    return _REGISTRY[name].description


def get_scorer(name: str, **options: Any) -> Scorer:
    """Build a registered scorer; string option values (from the CLI) are coerced to the declared types.

    >>> from rewardkit.types import Group
    >>> scorer = get_scorer("verifier", timeout="2.5")
    >>> scorer.options.timeout
    2.5
    >>> [s.rewards.tolist() for s in scorer.score([Group("q", "1/2 + 1/4?", [r"\\boxed{3/4}", "0.5"], reference="0.75")])]
    [[1.0, 0.0]]
    """
    cls = scorer_class(name)
    if not isinstance(getattr(cls, "Options", None), type):
        raise TypeError(f"scorer {name!r}: {cls.__qualname__} is not a rewardkit scorer (it has no Options class; "
                        "see rewardkit.scoring.BaseScorer)")
    return cls(**coerce_options(cls.Options, options, f"scorer {name!r}"))


# -------------------------------------------------------------------------------------- advantages

Estimator = Callable[[np.ndarray, np.ndarray | None], np.ndarray]


def _masked(rewards: np.ndarray, mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    r = np.atleast_2d(np.asarray(rewards, dtype=np.float64))
    m = np.isfinite(r) if mask is None else (np.atleast_2d(np.asarray(mask, dtype=bool)) & np.isfinite(r))
    return np.where(m, r, 0.0), m


def grpo_advantages(rewards: np.ndarray, mask: np.ndarray | None = None, eps: float = 1e-6) -> np.ndarray:
    """GRPO (Reasoning Arena eq. 2): A_i = (R_i - mean) / (std + eps), population std, per row.

    ``rewards`` is [G, N] (or [N]); masked / NaN entries are left out of the statistics and get A = 0.

    >>> grpo_advantages(np.array([1.0, 0.0, 1.0, 0.0]), eps=0).tolist()  # mean 1/2, std 1/2
    [1.0, -1.0, 1.0, -1.0]
    >>> grpo_advantages(np.array([1.0, np.nan, 0.0]), eps=0).tolist()  # NaN: masked, A = 0
    [1.0, 0.0, -1.0]
    """
    r, m = _masked(rewards, mask)
    n = np.maximum(m.sum(-1, keepdims=True), 1)
    mu = r.sum(-1, keepdims=True) / n
    var = (np.where(m, r - mu, 0.0) ** 2).sum(-1, keepdims=True) / n
    adv = np.where(m, (r - mu) / (np.sqrt(var) + eps), 0.0)
    return adv.reshape(np.shape(rewards))


def dr_grpo_advantages(rewards: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Dr. GRPO: A_i = R_i - mean (no std normalisation, removing its difficulty bias).

    >>> dr_grpo_advantages(np.array([1.0, 0.0, 0.0, 0.0])).tolist()
    [0.75, -0.25, -0.25, -0.25]
    """
    r, m = _masked(rewards, mask)
    n = np.maximum(m.sum(-1, keepdims=True), 1)
    mu = r.sum(-1, keepdims=True) / n
    return np.where(m, r - mu, 0.0).reshape(np.shape(rewards))


def rloo_advantages(rewards: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """RLOO: A_i = R_i - mean of the *other* valid responses (0 when a response has no peer).

    >>> rloo_advantages(np.array([1.0, 0.0, 0.0])).tolist()  # 1 - 0, 0 - 1/2, 0 - 1/2
    [1.0, -0.5, -0.5]
    """
    r, m = _masked(rewards, mask)
    n = m.sum(-1, keepdims=True)
    total = r.sum(-1, keepdims=True)
    loo = (total - r) / np.maximum(n - 1, 1)
    return np.where(m & (n > 1), r - loo, 0.0).reshape(np.shape(rewards))


ADVANTAGES: dict[str, Estimator] = {
    "grpo": grpo_advantages,
    "dr_grpo": dr_grpo_advantages,
    "rloo": rloo_advantages,
}


def reward_diversity(rewards: np.ndarray, mask: np.ndarray | None = None, tol: float = 0.0) -> np.ndarray:
    """D(G) = 1[sigma_G > 0] per group (Reasoning Arena eq. 3), over valid responses only."""
    r, m = _masked(rewards, mask)
    n = np.maximum(m.sum(-1), 1)
    mu = r.sum(-1, keepdims=True) / n[:, None]
    sd = np.sqrt((np.where(m, r - mu, 0.0) ** 2).sum(-1) / n)
    return sd > tol


@dataclass(frozen=True)
class DiversityStats:
    groups: int
    non_diverse: int
    all_correct: int  # non-diverse with every valid reward at the maximum (1 for binary rewards)
    all_incorrect: int  # non-diverse with every valid reward 0
    nonzero_advantage_fraction: float  # of valid responses, under GRPO

    @property
    def non_diverse_fraction(self) -> float:
        return self.non_diverse / self.groups if self.groups else 0.0


def diversity_stats(scores: Sequence[GroupScore] | Sequence[np.ndarray], eps: float = 1e-9) -> DiversityStats:
    """Count non-diverse / all-correct / all-incorrect groups and the share of responses with A != 0."""
    rows = [s.rewards if isinstance(s, GroupScore) else np.asarray(s, float) for s in scores]
    nd = ac = ai = 0
    nonzero = valid = 0
    for r in rows:
        ok = np.isfinite(r)
        v = r[ok]
        valid += len(v)
        if len(v) == 0:
            continue
        if not reward_diversity(v)[0]:
            nd += 1
            ac += bool(np.all(v == 1.0))
            ai += bool(np.all(v == 0.0))
        else:
            nonzero += int(np.sum(np.abs(grpo_advantages(v)) > eps))
    return DiversityStats(len(rows), nd, ac, ai, nonzero / valid if valid else 0.0)
