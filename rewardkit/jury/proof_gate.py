"""JURY-RL: votes propose, proofs dispose (majority proposal, proof gate eq. 4, ResZero eq. 5).

The maths (``vote``, ``reszero_rewards``, ``proof_gate_rewards``) is pure and works on answer labels;
the scorers add answer extraction, equivalence clustering (math-verify, so ``1/2`` and ``0.5`` are one
vote), one batched verifier call per round, and the fallback ablations of Table 3.

A verifier answers ``verify(problem, answer) -> VerifyResult`` with an outcome ``verified``, ``refuted``
or ``inconclusive``, a reason and a cost. A timeout, a crash or a missing toolchain is inconclusive, never
verified. ``ReferenceVerifier`` (math-verify against the reference answer) stands in for Lean in
ablations and measurements; ``rewardkit.jury.lean.LeanVerifier`` is the App. C pipeline.
"""

from __future__ import annotations

import random as _random
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from rewardkit.answers import AnswerChecker, default_checker, extract_answer
from rewardkit.backends import JudgeBackend, load_backend
from rewardkit.jury.reszero import reszero_rewards
from rewardkit.jury.vote import Vote, majority_vote, vote
from rewardkit.options import Options, option
from rewardkit.prompts import get_prompt, render
from rewardkit.scoring import BaseScorer, JudgeOptions, VerdictMode, resolve_mode
from rewardkit.types import Cost, Group, GroupScore, Status
from rewardkit.verdicts import parse_true_false
from rewardkit.verifier import (
    BaseVerifier,
    Claim,
    Outcome,
    ReferenceVerifier,
    Verifier,
    VerifyResult,
    make_checker,
    verify_all,
)

Fallback = Literal["reszero", "zero", "random", "mv"]

# ------------------------------------------------------------------------------------------ proof gate (eq. 4)


def proof_gate_rewards(
    labels: Sequence[Hashable | None],
    verified: Hashable | None,
    *,
    fallback: Fallback = "reszero",
    c: float = 0.01,
    rng: _random.Random | None = None,
) -> np.ndarray:
    """Eq. 4: r_i = delta * 1[a_i = a-hat] + (1 - delta) * r_i^fallback.

    ``verified`` is the label the verifier certified (delta = 1), or None (delta = 0: refuted or
    inconclusive), in which case the fallback of Table 3 applies: ResZero (eq. 5), zero, random (reward a
    uniformly drawn candidate answer), or mv (reward the unverified majority)."""
    v = vote(labels)
    if verified is not None:
        return v.mask(verified).astype(np.float64)
    if fallback == "reszero":
        return reszero_rewards(labels, c=c, majority=v.majority)
    if fallback == "zero":
        return np.zeros(len(labels))
    if fallback == "mv":
        return v.mask(v.majority).astype(np.float64)
    if fallback == "random":
        if not v.candidates:
            return np.zeros(len(labels))
        pick = (rng or _random.Random(0)).choice(list(v.candidates))
        return v.mask(pick).astype(np.float64)
    raise ValueError(f"unknown fallback {fallback!r}; use one of reszero, zero, random, mv")


# ------------------------------------------------------------------------------------------ scorers


def vote_groups(groups: list[Group], checker: AnswerChecker) -> list[tuple[Vote, list[str | None]]]:
    """Each group's JURY-RL vote over its extracted answers, with each cluster's representative answer."""
    return [majority_vote([extract_answer(r) for r in g.responses], checker=checker) for g in groups]


@dataclass(frozen=True)
class MajorityVoteOptions(Options):
    answer_timeout: float = option(5.0, "seconds per math-verify equivalence check")

    def __post_init__(self) -> None:
        super().__post_init__()
        self._at_least(0, "answer_timeout", strict=True)


class MajorityVoteScorer(BaseScorer):
    """Label-free majority vote (App. D): reward 1 for responses whose answer is equivalent to the
    plurality answer, 0 otherwise (no answer -> 0); ties go to the answer that appears first."""

    name = "majority-vote"
    group_relative = True
    Options = MajorityVoteOptions
    options: MajorityVoteOptions

    def _setup(self) -> None:
        self.checker = make_checker(self.options.answer_timeout)

    def _score(self, groups: list[Group]) -> list[GroupScore]:
        out = []
        for g, (v, reps) in zip(groups, vote_groups(groups, self.checker), strict=True):
            maj = v.majority
            out.append(GroupScore(
                g.id, v.mask(maj).astype(np.float64), [Status.OK] * len(g),
                stats={"majority_share": v.share, "majority_answer": reps[maj] if maj is not None else None,
                       "distinct_answers": len(v.candidates)},
            ))
        return out


@dataclass(frozen=True)
class GateOptions(Options):
    """What the proof gate does with a verdict (shared by the proof-gate and llm-judge scorers)."""

    fallback: Fallback = option("reszero", "reward when the gate is closed: reszero (eq. 5), zero, random, mv (Table 3 ablations)")
    c: float = option(0.01, "ResZero penalty strength (eq. 5); 0.01 in the paper")
    top_k: int = option(1, "verify up to the k most-voted answers, one round each, and reward the first verified one")
    seed: int = option(0, "seed of the random fallback")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.top_k < 1:
            raise ValueError(f"option 'top_k': must be >= 1, got {self.top_k}")
        self._at_least(0, "c")


@dataclass(frozen=True)
class ProofGateOptions(GateOptions, JudgeOptions):
    # No default reads labels: JURY-RL's gate is label-free (App. C Lean pipeline). The reference verifier
    # checks the majority answer against Group.reference, an oracle (precision/recall 1 by construction),
    # so it is there for ablations and must be chosen by name.
    verifier: Literal["lean", "llm-judge", "reference"] | Verifier = option(
        "lean", "lean (App. C pipeline; needs a usable Lean checker, see rewardkit lean-doctor), llm-judge (label-free App. D judge on the majority answer), reference (math-verify against Group.reference: reads labels, an oracle for ablations) or a Verifier")
    lean: str = option("auto", "Lean check backend for verifier=lean: auto, a lean path, repl:<command>, or a Kimina URL")
    cache: str | None = option(None, "path of the sqlite verification cache (verifier=lean); none for no cache")


class ProofGateScorer(BaseScorer):
    """JURY-RL (eq. 4): verify the majority answer once per group; verified -> 1 for the responses with
    that answer, 0 otherwise; refuted or inconclusive -> the fallback (ResZero, eq. 5, by default)."""

    name = "proof-gate"
    group_relative = True
    Options = ProofGateOptions
    options: ProofGateOptions
    mask_failures = False  # judge baselines: an unusable verdict masks the group (never a silent 0)

    def _setup(self) -> None:
        self.rng = _random.Random(self.options.seed)
        self.checker = default_checker()
        self.verifier = self._verifier()

    def _verifier(self) -> Verifier:
        o = self.options
        if o.verifier == "reference":
            return ReferenceVerifier(self.checker)
        if o.verifier == "llm-judge":
            return LLMJudgeVerifier(o.judge, mode=o.mode)
        if o.verifier == "lean":
            from rewardkit.jury.lean.pipeline import LeanVerifier
            from rewardkit.jury.lean.subprocess import LeanToolchainError

            try:
                return LeanVerifier.from_specs(backend=o.judge, lean=o.lean, cache=o.cache)
            except LeanToolchainError as e:
                raise ValueError(
                    f"proof-gate: verifier=lean needs a usable Lean 4 checker and none is: {e} -- or choose "
                    "-o verifier=llm-judge (label-free: an LLM judge verifies the majority answer) or "
                    "-o verifier=reference (reads the reference answers: an oracle, for ablations)") from None
        return o.verifier  # type: ignore[return-value]

    @property
    def verifier_name(self) -> str:
        """What verified the majority answer, recorded in every output row."""
        return getattr(self.verifier, "name", "") or type(self.verifier).__name__

    def _score(self, groups: list[Group]) -> list[GroupScore]:
        votes = vote_groups(groups, self.checker)
        costs = [Cost() for _ in groups]
        tried: list[list[dict[str, Any]]] = [[] for _ in groups]
        verified: list[Hashable | None] = [None] * len(groups)
        for k in range(self.options.top_k):  # one batched verifier call per round (top-k, App. G.3)
            todo = [gi for gi, (v, _) in enumerate(votes) if verified[gi] is None and len(v.candidates) > k]
            if not todo:
                break
            claims = []
            for gi in todo:
                v, reps = votes[gi]
                claims.append(Claim(groups[gi].prompt, reps[v.candidates[k]], groups[gi].reference))  # type: ignore[index]
            results = verify_all(self.verifier, claims)
            for gi, cl, res in zip(todo, claims, results):
                costs[gi] += res.cost
                tried[gi].append({"answer": cl.answer, "outcome": res.outcome, "reason": res.reason,
                                  "cached": res.cached, "status": res.detail.get("status")})
                if res.verified:
                    verified[gi] = votes[gi][0].candidates[k]
        out = []
        for gi, g in enumerate(groups):
            v, reps = votes[gi]
            failed = [t for t in tried[gi] if t.get("status") not in (None, "ok")]
            if self.mask_failures and failed and verified[gi] is None:
                st = Status(failed[0]["status"])
                out.append(GroupScore.failed(g.id, len(g), st, failed[0]["reason"], cost=costs[gi],
                                             stats={"verifier": self.verifier_name},
                                             extra={"verifications": tried[gi]}))
                continue
            rewards = proof_gate_rewards(v.labels, verified[gi], fallback=self.options.fallback, c=self.options.c, rng=self.rng)
            outcomes = [t["outcome"] for t in tried[gi]]
            gate = "verified" if verified[gi] is not None else ("refuted" if "refuted" in outcomes else "inconclusive")
            maj = v.majority
            out.append(GroupScore(
                g.id, rewards, [Status.OK] * len(g),
                stats={"verifier": self.verifier_name, "gate": gate,
                       "fallback": None if verified[gi] is not None else self.options.fallback,
                       "majority_share": v.share,
                       "majority_answer": reps[maj] if maj is not None else None,  # type: ignore[index]
                       "verified_answer": reps[verified[gi]] if verified[gi] is not None else None},  # type: ignore[index]
                cost=costs[gi],
                extra={"verifications": tried[gi]},
            ))
        return out


# ------------------------------------------------------------------------------ LLM-as-a-judge (App. D)

class LLMJudgeVerifier(BaseVerifier):
    """An LLM judges whether the answer to the question is correct (App. D prompt): True -> verified,
    False -> refuted. ``samples`` > 1 takes the majority of the parsed judgments (the paper's MV@4 judge);
    ``mode="logit"`` reads p(True) vs p(False) after "Final judgment: " in one forward pass instead.
    An unparseable or failed judgment is inconclusive with ``detail["status"]`` set (the scorer masks it)."""

    name = "llm-judge"

    def __init__(self, judge: JudgeBackend | str, *, mode: VerdictMode = "generate", samples: int = 1,
                 max_tokens: int = 512, temperature: float = 0.0):
        self.backend, self.samples = load_backend(judge), samples
        self.mode = resolve_mode(mode, self.backend)
        self.max_tokens, self.temperature = max_tokens, temperature

    def messages(self, c: Claim) -> list[dict[str, str]]:
        """The App. D judge's chat for one (question, answer) claim."""
        return [{"role": "system", "content": get_prompt("jury.llm_judge_system").text},
                {"role": "user", "content": render("jury.llm_judge_user", problem=c.problem.strip(), answer=c.answer.strip())}]

    def verify_many(self, claims: Sequence[Claim]) -> list[VerifyResult]:
        from rewardkit.backends.base import ChatRequest, VerdictRequest, cost_of

        if not claims:
            return []
        if self.mode == "logit":
            res = self.backend.verdict_probs([VerdictRequest(self.messages(c), ("True", "False"), "Final judgment: ")
                                              for c in claims])
            out = []
            for r in res:
                cost = cost_of([r])
                if r.status is not Status.OK:
                    out.append(VerifyResult("inconclusive", f"judge {r.status}: {r.error}", cost,
                                            detail={"status": r.status.value}))
                else:
                    p = float(r.probs[0])
                    out.append(VerifyResult("verified" if p >= 0.5 else "refuted", f"p(True) = {p:.3f}", cost,
                                            r.cached, {"p_true": p}))
            return out
        reqs = [ChatRequest(self.messages(c), max_tokens=self.max_tokens, n=self.samples,
                            temperature=self.temperature if self.samples == 1 else max(self.temperature, 0.7))
                for c in claims]
        out = []
        for comp in self.backend.generate(reqs):
            cost = cost_of([comp])
            if comp.status is not Status.OK:
                out.append(VerifyResult("inconclusive", f"judge {comp.status}: {comp.error}", cost,
                                        detail={"status": comp.status.value}))
                continue
            # an ok reply without text (an empty "choices" list) reads as one empty judgment, as Completion.text does
            verdicts = [parse_true_false(t, comp.finish_reason(i)) for i, t in enumerate(comp.texts or [""])]
            ok = [v.label for v in verdicts if v.ok]
            if not ok:
                out.append(VerifyResult("inconclusive", verdicts[0].message or "invalid judgment", cost,
                                        detail={"status": Status.INVALID.value}))
                continue
            t, f = ok.count("True"), ok.count("False")
            outcome: Outcome = "verified" if t > f else "refuted" if f > t else "inconclusive"
            out.append(VerifyResult(outcome, f"judge: {t} True / {f} False", cost, comp.cached,
                                    {"judgments": ok}))
        return out


@dataclass(frozen=True)
class LLMJudgeOptions(GateOptions, JudgeOptions):
    fallback: Fallback = option("zero", "reward when the judge says False: zero, reszero, random, mv")
    samples: int = option(1, "judgments per answer, majority of them (the paper's MV@4 judge uses 4)")
    max_tokens: int = option(512, "generation budget of one judgment")


class LLMJudgeScorer(ProofGateScorer):
    """App. D baseline: an LLM judge decides whether the majority answer is correct; True -> reward 1 for
    the responses with it, False -> the fallback (zero by default: the judge's label is the reward).
    Unparseable judge output masks the group (status invalid), never a silent 0."""

    name = "llm-judge"
    Options = LLMJudgeOptions
    options: LLMJudgeOptions  # type: ignore[assignment]
    mask_failures = True

    def _verifier(self) -> Verifier:
        o = self.options
        return LLMJudgeVerifier(o.judge, mode=o.mode, samples=o.samples, max_tokens=o.max_tokens)
