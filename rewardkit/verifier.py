"""Verifiers: the interface every verifier implements, and the answer-check reward R_v shared by all scorers.

Two kinds of verification live here. ``verify_groups`` is the binary answer reward (extract each final
answer, check it against the group's reference with math-verify) that the verifier, arena, pointwise and
slice scorers all use, with one cost rule: ``verifier_calls`` counts checks actually run, ``cache_hits``
checks served from the answer cache. ``Verifier`` / ``Claim`` / ``VerifyResult`` are the interface of
claim verifiers (``ReferenceVerifier`` here, ``rewardkit.jury.lean.LeanVerifier``) that JURY-RL's proof gate
calls; it sits in this module so the Lean pipeline and the proof gate both import it without a cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

import numpy as np

from rewardkit.answers import AnswerChecker, Check, default_checker, extract_answer
from rewardkit.options import Options, option
from rewardkit.scoring import BaseScorer
from rewardkit.types import Cost, Group, GroupScore, Status, as_references, batch_call

Outcome = Literal["verified", "refuted", "inconclusive"]
K = TypeVar("K")

# ------------------------------------------------------------------------------- the answer reward


def check_cost(checks: Sequence[Check]) -> Cost:
    """The cost of answer checks: a check served from the cache is a cache hit, not a verifier call."""
    hits = sum(c.cached for c in checks)
    return Cost(verifier_calls=len(checks) - hits, cache_hits=hits)


def make_checker(timeout: float = 5.0, workers: int = 2, checker: AnswerChecker | None = None) -> AnswerChecker:
    """The given checker, the shared process-wide one for the default settings, or a new one."""
    if checker is not None:
        return checker
    return default_checker() if (timeout, workers) == (5.0, 2) else AnswerChecker(timeout, workers)


@dataclass
class VerifiedGroup:
    """Binary verifier rewards R_v of one group (NaN where a check did not finish), with statuses."""

    rewards: np.ndarray
    statuses: list[Status]
    messages: list[str | None]
    available: bool  # False when the group has no reference (and no usable labels)
    preds: list[str | None] = field(default_factory=list)  # extracted final answers (empty with labels)
    cost: Cost = field(default_factory=Cost)


def verify_groups(groups: Sequence[Group], checker: AnswerChecker, use_labels: bool = False) -> list[VerifiedGroup]:
    """R_v (Reasoning Arena eq. 2) for every response of every group, in one batched checker call.

    A response without a final answer gets 0 (wrong, not unknown); a check that times out or crashes
    keeps that status and no reward; a group without a reference is unavailable (every response abstains).
    With ``use_labels``, ``Group.labels`` are the rewards where present (no check, no cost).
    """
    out: list[VerifiedGroup] = []
    answers: list[tuple[tuple[int, int], str | None, Sequence[str]]] = []
    for g_idx, g in enumerate(groups):
        n = len(g)
        if use_labels and g.labels is not None:
            out.append(VerifiedGroup(np.array(g.labels, float), [Status.OK] * n, [None] * n, True))
            continue
        preds = [extract_answer(r) for r in g.responses]
        if not g.references:
            out.append(VerifiedGroup(np.full(n, np.nan), [Status.ABSTAIN] * n,
                                     ["group has no reference answer for the verifier"] * n, False, preds))
            continue
        out.append(VerifiedGroup(np.zeros(n), [Status.OK] * n, [None] * n, True, preds))
        answers += [((g_idx, k), p, g.references) for k, p in enumerate(preds)]
    for (g_idx, k), (c, cost) in check_against_references(checker, answers).items():
        v = out[g_idx]
        v.cost += cost
        if c.status is Status.OK and c.equivalent is not None:
            v.rewards[k] = 1.0 if c.equivalent else 0.0
        else:
            v.rewards[k] = np.nan
            v.statuses[k] = c.status if c.status is not Status.OK else Status.ERROR
            v.messages[k] = c.message or "verifier did not finish"
    return out


def check_against_references(checker: AnswerChecker, answers: Sequence[tuple[K, str | None, Sequence[str]]]
                             ) -> dict[K, tuple[Check, Cost]]:
    """Each ``(key, answer, references)`` checked against every one of its references in one batched checker
    call: per key, one verdict (``any_gold``) and the cost of its checks. A key with no references is absent."""
    pairs = [(key, gold, answer) for key, answer, golds in answers for gold in golds]
    checks = checker.check_many([(gold, answer) for _, gold, answer in pairs]) if pairs else []
    per: dict[K, list[Check]] = {}
    for (key, _, _), c in zip(pairs, checks, strict=True):
        per.setdefault(key, []).append(c)
    return {key: (any_gold(cs), check_cost(cs)) for key, cs in per.items()}


def any_gold(checks: Sequence[Check]) -> Check:
    """One verdict from the checks of one answer against several references (math-verify's rule for a list
    of golds): equivalent if any check says so; else the first check that did not finish (a wrong answer is
    not known to be wrong while one reference is unchecked); else not equivalent."""
    return (next((c for c in checks if c.status is Status.OK and c.equivalent), None)
            or next((c for c in checks if c.status is not Status.OK or c.equivalent is None), None)
            or checks[0])


@dataclass(frozen=True)
class VerifierOptions(Options):
    timeout: float = option(5.0, "seconds allowed per (gold, prediction) check before it counts as a timeout")
    workers: int = option(2, "answer-check worker processes")
    checker: AnswerChecker | None = option(None, "an AnswerChecker to use instead (Python only)")

    def __post_init__(self) -> None:
        super().__post_init__()
        self._at_least(0, "timeout", strict=True)
        self._at_least(1, "workers")


class VerifierScorer(BaseScorer):
    """Binary exact-answer reward R_v: extract each final answer, check it against the group's reference.

    A response with no final answer gets reward 0 (it is wrong, not unknown); a check that times out or
    crashes gets that status and no reward; a group without a reference answer abstains.
    """

    name = "verifier"
    Options = VerifierOptions
    options: VerifierOptions

    @property
    def checker(self) -> AnswerChecker:
        o = self.options
        return make_checker(o.timeout, o.workers, o.checker)

    def _score(self, groups: list[Group]) -> list[GroupScore]:
        out = []
        for g, v in zip(groups, verify_groups(groups, self.checker), strict=True):
            out.append(GroupScore(g.id, v.rewards, v.statuses, components={"verifier": v.rewards.copy()},
                                  cost=v.cost, messages=v.messages if any(v.messages) else None,
                                  extra={"preds": v.preds}))
        return out


# ------------------------------------------------------------------------- the claim verifier interface


@dataclass(frozen=True)
class Claim:
    """One thing to verify: is ``answer`` the answer to ``problem``? (``reference`` only for ablations)."""

    problem: str
    answer: str
    reference: str | tuple[str, ...] | None = None  # several: any of them is right


@dataclass
class VerifyResult:
    """A verifier's outcome with its reason and cost; inconclusive is the only safe failure."""

    outcome: Outcome
    reason: str = ""
    cost: Cost = field(default_factory=Cost)
    cached: bool = False
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def verified(self) -> bool:
        return self.outcome == "verified"


@runtime_checkable
class Verifier(Protocol):
    """``verify_many(claims) -> results`` (one batched call) and ``verify(problem, answer)``."""

    name: str

    def verify_many(self, claims: Sequence[Claim]) -> list[VerifyResult]: ...

    def verify(self, problem: str, answer: str, *, reference: str | tuple[str, ...] | None = None) -> VerifyResult: ...


def verify_all(verifier: Verifier, claims: Sequence[Claim]) -> list[VerifyResult]:
    """One batched ``verify_many`` call (none for no claim), one result per claim (``types.batch_call``)."""
    return batch_call(verifier.verify_many, claims,
                      f"verifier {getattr(verifier, 'name', '') or type(verifier).__name__!r}", of="claims")


class BaseVerifier:
    """Implements ``verify`` on top of ``verify_many``."""

    name = ""

    def verify(self, problem: str, answer: str, *, reference: str | tuple[str, ...] | None = None) -> VerifyResult:
        return self.verify_many([Claim(problem, answer, reference)])[0]

    def verify_many(self, claims: Sequence[Claim]) -> list[VerifyResult]:  # pragma: no cover - interface
        raise NotImplementedError


class ReferenceVerifier(BaseVerifier):
    """Reference-answer verifier (math-verify, gold first): for ablations and for measuring the gate.

    Not label-free: it needs ``Claim.reference``; without one the claim is inconclusive."""

    name = "reference"

    def __init__(self, checker: AnswerChecker | None = None):
        self.checker = checker or default_checker()

    def verify_many(self, claims: Sequence[Claim]) -> list[VerifyResult]:
        answers = [(i, cl.answer, as_references(cl.reference)) for i, cl in enumerate(claims)]
        out = [VerifyResult("inconclusive", "no reference answer to check against") for _ in claims]
        for i, (ch, cost) in check_against_references(self.checker, answers).items():
            if ch.status is not Status.OK or ch.equivalent is None:
                out[i] = VerifyResult("inconclusive", ch.message or f"answer check {ch.status}", cost)
            elif ch.equivalent:
                out[i] = VerifyResult("verified", "equivalent to the reference answer", cost, ch.cached)
            else:
                out[i] = VerifyResult("refuted", "differs from the reference answer", cost, ch.cached)
        return out
