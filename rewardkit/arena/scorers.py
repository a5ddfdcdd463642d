"""Reasoning Arena: adaptive routing (eq. 5), trace tournaments with Bradley-Terry rewards, pointwise judges.

Scorers (registry names): ``arena`` (verifier reward on reward-diverse groups, tournament reward on
non-diverse ones), ``tournament`` (ArenaRL: tournament on every group), ``pointwise`` (RLAIF rubric judge
on every response) and ``adaptive-pointwise`` (rubric judge only on non-diverse groups).

How failures are handled:
- A judge call whose output has no ``\\boxed{A|B|Tie}`` (or a backend error / timeout) is an *invalid
  match*: it is dropped from the fit and listed in ``extra["invalid_matches"]``; it never becomes a tie.
- A trace left with no valid match gets status ``invalid`` (reward NaN), never a made-up reward; the
  remaining traces are ranked on the valid matches only.
- A verifier check that times out keeps its status (timeout) in a reward-diverse group; routing decides
  diversity (eq. 3) over the responses with a valid verifier reward.
- A group with neither a reference answer nor (with ``use_labels``) labels cannot be routed: every
  response ``abstain`` with a message.

The tournament logic and the maths live in ``rewardkit.arena.ranking`` (pure, no model); this module turns
pairs into judge prompts, batches every pending pair of every routed group into ONE backend call per
round, and maps verdicts to soft outcomes (eq. 7).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from rewardkit.answers import AnswerChecker, response_trunk
from rewardkit.arena.ranking import minmax_normalize, newton_soft_pairwise_batched, win_rate_pairwise
from rewardkit.arena.tournaments import (
    LiveTournament,
    RoundRobin,
    Tournament,
    UncertaintyTournament,
    anchor_opponents,
    random_opponents,
)
from rewardkit.backends.base import ChatRequest, VerdictRequest, cost_of
from rewardkit.options import option
from rewardkit.prompts.arena import (
    POINTWISE_VERDICT_PREFIX,
    TOURNAMENT_VERDICT_PREFIX,
    pointwise_prompt,
    tournament_prompt,
)
from rewardkit.scoring import JudgeOptions, JudgeScorer, grpo_advantages, reward_diversity
from rewardkit.types import Cost, Group, GroupScore, Status
from rewardkit.verdicts import parse_boxed_choice, parse_boxed_score
from rewardkit.verifier import VerifiedGroup, make_checker, verify_groups

__all__ = [
    "AdaptivePointwiseScorer",
    "ArenaScorer",
    "PointwiseScorer",
    "TournamentScorer",
    "arena_summary",
    "expected_outcome",
    "nonzero_advantage_count",
    "verdict_outcome",
]

Schedule = Literal["live", "round-robin", "uncertainty", "random"]

# ------------------------------------------------------------------------------------ pure helpers


def verdict_outcome(label: str, gamma: float = 1.0) -> float:
    """Eq. 7: soft outcome for the response shown first: gamma for A, 1/2 for a tie, 1 - gamma for B."""
    if not 0.5 < gamma <= 1.0:
        raise ValueError(f"arena: gamma must lie in (1/2, 1] (eq. 7), got {gamma}")
    return {"A": gamma, "Tie": 0.5, "B": 1.0 - gamma}[label]


def expected_outcome(probs: Sequence[float], gamma: float = 1.0) -> float:
    """Verdict-logit mode: eq. 7's outcome averaged over the judge's probabilities of (A, B, Tie)."""
    pa, pb, pt = (float(x) for x in probs)
    return gamma * pa + 0.5 * pt + (1.0 - gamma) * pb


def nonzero_advantage_count(rewards: np.ndarray, eps: float = 1e-9) -> tuple[int, int]:
    """(responses with |GRPO advantage| > eps, valid responses) of one group: the Fig. 5 measure."""
    r = np.asarray(rewards, dtype=float)
    ok = np.isfinite(r)
    if ok.sum() == 0:
        return 0, 0
    adv = grpo_advantages(r[ok])
    return int(np.sum(np.abs(adv) > eps)), int(ok.sum())


def group_rng(seed: int, group_id: str) -> np.random.Generator:
    """A generator fixed by the scorer seed and the group id (order debiasing is reproducible per group)."""
    return np.random.default_rng([seed, zlib.crc32(group_id.encode())])


def arena_summary(scores: Sequence[GroupScore]) -> dict[str, Any]:
    """Batch statistics: routed fraction, all-correct / all-incorrect split, judge calls per routed group,
    non-zero-advantage fraction before (verifier) and after routing, and the judge's position bias."""
    routed = [s for s in scores if s.stats.get("routed")]
    before = [s.stats.get("nonzero_adv_before") for s in scores]
    after = [s.stats.get("nonzero_adv_after") for s in scores]
    vb = [s.stats.get("valid_before") for s in scores]
    va = [s.stats.get("valid_after") for s in scores]
    firsts = [x for s in scores for x in s.extra.get("first_shown_outcomes", [])]
    agree = [s.stats.get("order_agreement") for s in scores if s.stats.get("order_agreement") is not None]
    return {
        "groups": len(scores),
        "routed": len(routed),
        "routed_fraction": len(routed) / len(scores) if scores else 0.0,
        "routed_all_correct": sum(bool(s.stats.get("all_correct")) for s in routed),
        "routed_all_incorrect": sum(bool(s.stats.get("all_incorrect")) for s in routed),
        "judge_calls": sum(s.stats.get("judge_calls", 0) for s in scores),  # requests, cached or not
        "judge_calls_per_routed_group": (sum(s.stats.get("judge_calls", 0) for s in routed) / len(routed)
                                         if routed else 0.0),
        "invalid_matches": sum(s.stats.get("invalid_matches", 0) for s in scores),
        "nonzero_adv_fraction_before": (sum(x for x in before if x is not None) / max(sum(x for x in vb if x), 1)
                                        if any(x is not None for x in before) else None),
        "nonzero_adv_fraction_after": sum(x or 0 for x in after) / max(sum(x or 0 for x in va), 1),
        # mean outcome of the response shown first, minus 1/2: > 0 means the judge favours position A
        "position_bias": float(np.mean(firsts) - 0.5) if firsts else None,
        "order_agreement": float(np.mean(agree)) if agree else None,
    }


# --------------------------------------------------------------------------------- shared plumbing


@dataclass
class _Outcome:
    value: float | None  # soft outcome / score, None when the call failed
    status: Status
    message: str | None


class _ArenaJudge(JudgeScorer):
    """What the arena's scorers share: the verifier reward R_v and one batched judge call per round."""

    options: Any

    @property
    def checker(self) -> AnswerChecker:
        return make_checker(checker=self.options.checker)

    def _verify(self, groups: Sequence[Group]) -> list[VerifiedGroup]:
        return verify_groups(groups, self.checker, self.options.use_labels)

    def _shown(self, response: str) -> str:
        """What the judge reads of a response (option ``view``): the trunk by default, as the paper does."""
        return response if self.options.view == "full" else response_trunk(response)

    def _ask(self, prompts: list[str], kind: Literal["pair", "point"], gamma: float = 1.0
             ) -> tuple[list[_Outcome], list[Cost]]:
        """One batched backend call for all prompts; outcomes for the first-shown response (pairs) or scores."""
        if not prompts:
            return [], []
        o = self.options
        msgs = [[{"role": "user", "content": p}] for p in prompts]
        out: list[_Outcome] = []
        if self.verdict_mode == "logit":
            choices = ("A", "B", "Tie") if kind == "pair" else ("1", "0.5", "0")
            prefix = TOURNAMENT_VERDICT_PREFIX if kind == "pair" else POINTWISE_VERDICT_PREFIX
            results = self.judge.verdict_probs([VerdictRequest(m, choices, prefix) for m in msgs])
            for r in results:
                if r.status is not Status.OK or len(r.probs) != 3:
                    out.append(_Outcome(None, r.status if r.status is not Status.OK else Status.ERROR,
                                        r.error or "judge returned no verdict probabilities"))
                elif kind == "pair":
                    out.append(_Outcome(expected_outcome(r.probs, gamma), Status.OK, None))
                else:
                    p1, p05, _ = (float(x) for x in r.probs)
                    out.append(_Outcome(p1 + 0.5 * p05, Status.OK, None))  # expected rubric score
        else:
            results = self.judge.generate([ChatRequest(m, max_tokens=o.max_tokens, temperature=o.temperature,
                                                       seed=o.seed) for m in msgs])
            for r in results:
                if r.status is not Status.OK:
                    out.append(_Outcome(None, r.status, r.error or f"judge call failed ({r.status})"))
                    continue
                v = (parse_boxed_choice(r.text, finish_reason=r.finish_reason()) if kind == "pair"
                     else parse_boxed_score(r.text, finish_reason=r.finish_reason()))
                if not v.ok:
                    out.append(_Outcome(None, v.status, v.message))
                elif kind == "pair":
                    out.append(_Outcome(verdict_outcome(v.label, gamma), Status.OK, None))
                else:
                    out.append(_Outcome(float(v.label), Status.OK, None))
        return out, [cost_of([r]) for r in results]


def diversity_components(v: VerifiedGroup) -> dict[str, Any]:
    """Eq. 3 diversity, all-correct / all-incorrect and the Fig. 5 count of one group's verifier rewards."""
    ok = np.isfinite(v.rewards)
    if not v.available or not ok.any():
        return {"diverse": None, "all_correct": None, "all_incorrect": None, "nonzero_adv_before": None,
                "valid_before": None}
    r = v.rewards[ok]
    diverse = bool(reward_diversity(r)[0])  # eq. 3
    nz, valid = nonzero_advantage_count(v.rewards)
    return {"diverse": diverse, "all_correct": (not diverse) and bool(np.all(r == 1.0)),
            "all_incorrect": (not diverse) and bool(np.all(r == 0.0)), "nonzero_adv_before": nz,
            "valid_before": valid}


def _finish(group_id: str, rewards: np.ndarray, statuses: list[Status], messages: list[str | None],
            stats: dict[str, Any], cost: Cost, extra: dict[str, Any] | None = None) -> GroupScore:
    rewards = np.where([s is Status.OK for s in statuses], rewards, np.nan)
    nz, valid = nonzero_advantage_count(rewards)
    stats = {**stats, "nonzero_adv_after": nz, "valid_after": valid}
    return GroupScore(group_id, rewards, statuses, stats=stats, cost=cost,
                      messages=messages if any(messages) else None, extra=extra or {})


# ------------------------------------------------------------------------------------- tournaments


@dataclass(frozen=True)
class ArenaJudgeOptions(JudgeOptions):
    """What every arena judge prompt shares: which part of a response the judge reads."""

    view: Literal["answer", "full"] = option(
        "answer", "what the judge reads of a response: answer (the response trunk after any </think>, as the paper judges) or full (keep the reasoning block)")


@dataclass(frozen=True)
class ArenaOptions(ArenaJudgeOptions):
    schedule: Schedule = option("live", "live (best/worst/median anchors, App. B), round-robin, uncertainty (ours), random (live, 3 random opponents)")
    reward: Literal["auto", "bt", "winrate"] = option(
        "auto", "auto (win-rate eq. 8 for round-robin, Bradley-Terry eq. 10 min-max otherwise), bt, winrate")
    gamma: float = option(1.0, "soft-margin of eq. 7, in (1/2, 1]")
    l2: float = option(1.0, "L2 weight of the Bradley-Terry fit (eq. 10)")
    both_orders: bool = option(False, "query both presentation orders of every pair and average them")
    seed: int = option(0, "seed of the presentation-order randomisation and of the schedules")
    max_tokens: int = option(1024, "judge generation budget (generate mode)")
    temperature: float = option(0.0, "judge sampling temperature (generate mode)")
    use_labels: bool = option(False, "use Group.labels as the verifier reward when present")
    budget: int | None = option(None, "judge calls per group for the uncertainty schedule (default 2N)")
    checker: AnswerChecker | None = option(None, "an AnswerChecker for the verifier reward (Python only)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.5 < self.gamma <= 1.0:
            raise ValueError(f"option 'gamma': must lie in (1/2, 1] (eq. 7), got {self.gamma}")
        self._at_least(1, "max_tokens", "budget")
        self._at_least(0, "temperature", "l2")
        if self.schedule == "uncertainty" and self.l2 <= 0:  # its Laplace posterior needs the prior
            raise ValueError(f"option 'l2': must be > 0 for schedule=uncertainty (the Bradley-Terry posterior it "
                             f"schedules by needs the prior), got {self.l2}")
        if self.bt_reward and self.l2 <= 0:  # refused here, not after every judge call of a batch was spent
            raise ValueError(f"option 'l2': must be > 0 for a Bradley-Terry reward (reward={self.reward}, schedule="
                             f"{self.schedule}; the batched eq. 10 fit needs the prior; reward=winrate fits nothing), "
                             f"got {self.l2}")

    @property
    def bt_reward(self) -> bool:
        """Whether the reward is the Bradley-Terry fit (eq. 10) rather than the win rate (eq. 8)."""
        return self.reward == "bt" or (self.reward == "auto" and self.schedule != "round-robin")


@dataclass(frozen=True)
class TournamentOptions(ArenaOptions):
    schedule: Schedule = option("round-robin", "round-robin (ArenaRL), live, uncertainty, random")


class ArenaScorer(_ArenaJudge):
    """Reasoning Arena (eq. 5): verifier reward on reward-diverse groups, trace-tournament reward otherwise."""

    name = "arena"
    group_relative = True
    Options = ArenaOptions
    options: ArenaOptions
    route = True

    def _tournament(self, g: Group, rng: np.random.Generator) -> Tournament:
        n = len(g)
        if self.options.schedule == "round-robin":
            return RoundRobin(n)
        if self.options.schedule == "uncertainty":
            return UncertaintyTournament(n, budget=self.options.budget, l2=self.options.l2, rng=rng)
        order = g.metadata.get("completion_order")  # traces arrive in completion order when known
        select = anchor_opponents if self.options.schedule == "live" else random_opponents(3)
        return LiveTournament(n, order=order, select=select, rng=rng)

    def _score(self, groups: list[Group]) -> list[GroupScore]:
        verified = self._verify(groups)
        costs = [v.cost for v in verified]
        comps = [diversity_components(v) for v in verified]
        routed = []
        for k, comp in enumerate(comps):
            if self.route:
                if comp["diverse"] is False and len(groups[k]) >= 2:  # one response cannot be ranked
                    routed.append(k)
            elif len(groups[k]) >= 2:
                routed.append(k)
        judged = self._run_tournaments([groups[k] for k in routed], [costs[k] for k in routed])
        judged_by = dict(zip(routed, judged, strict=True))
        out = []
        for k, g in enumerate(groups):
            v, comp = verified[k], comps[k]
            if k in judged_by:
                rewards, statuses, messages, tcomp, extra = judged_by[k]
                out.append(_finish(g.id, rewards, statuses, messages, {**comp, "routed": True, **tcomp}, costs[k], extra))
            elif self.route and not v.available:
                out.append(_finish(g.id, np.full(len(g), np.nan), [Status.ABSTAIN] * len(g),
                                   ["no reference answer or labels: cannot decide routing"] * len(g),
                                   {**comp, "routed": False, "judge_calls": 0}, costs[k]))
            else:
                why = None if self.route else "fewer than two responses: no tournament"
                msgs = [m or why for m in v.messages] if why else list(v.messages)
                sts = v.statuses if self.route else [Status.ABSTAIN] * len(g)
                out.append(_finish(g.id, v.rewards, sts, msgs, {**comp, "routed": False, "judge_calls": 0}, costs[k]))
        return out

    def _run_tournaments(self, groups: list[Group], costs: list[Cost]):
        """All routed groups' tournaments, one backend call per round across the whole batch."""
        rngs = [group_rng(self.options.seed, g.id) for g in groups]
        tours = [self._tournament(g, r) for g, r in zip(groups, rngs, strict=True)]
        firsts: list[list[float]] = [[] for _ in groups]
        agree: list[list[bool]] = [[] for _ in groups]
        verdict_log: list[list[dict[str, Any]]] = [[] for _ in groups]
        requests = [0] * len(groups)
        while True:
            rounds = [t.next_round() for t in tours]
            if not any(rounds):
                break
            prompts: list[str] = []
            index: list[tuple[int, int, bool]] = []  # (group, pair index, i shown first?)
            for gi, (g, pairs) in enumerate(zip(groups, rounds, strict=True)):
                for pi, (i, j) in enumerate(pairs):
                    # order debiasing: presentation order drawn per pair, or both orders
                    orders = [True, False] if self.options.both_orders else [bool(rngs[gi].random() < 0.5)]
                    for i_first in orders:
                        a, b = (i, j) if i_first else (j, i)
                        prompts.append(tournament_prompt(g.prompt, g.reference, self._shown(g.responses[a]),
                                                         self._shown(g.responses[b])))
                        index.append((gi, pi, i_first))
            results, call_costs = self._ask(prompts, "pair", self.options.gamma)
            got: list[list[list[tuple[bool, _Outcome]]]] = [[[] for _ in p] for p in rounds]
            for (gi, pi, i_first), res, c in zip(index, results, call_costs, strict=True):
                got[gi][pi].append((i_first, res))
                costs[gi] += c
                requests[gi] += 1
            for gi, (t, pairs) in enumerate(zip(tours, rounds, strict=True)):
                if not pairs:
                    continue
                outcomes, reasons = [], []
                for (i, j), answers in zip(pairs, got[gi], strict=True):
                    vals = []
                    for i_first, res in answers:
                        if res.value is not None:
                            firsts[gi].append(res.value)
                            vals.append(res.value if i_first else 1.0 - res.value)  # o_ij in i's frame
                        verdict_log[gi].append({"i": i, "j": j, "i_first": i_first, "outcome_first": res.value,
                                                "status": res.status.value, "message": res.message})
                    if len(vals) == 2:
                        agree[gi].append((vals[0] - 0.5) * (vals[1] - 0.5) > 0 or vals[0] == vals[1])
                    outcomes.append(float(np.mean(vals)) if vals else None)
                    reasons.append(None if vals else "; ".join(r.message or str(r.status) for _, r in answers))
                t.record(pairs, outcomes, reasons)
        return self._rewards(groups, tours, firsts, agree, verdict_log, requests)

    def _rewards(self, groups, tours, firsts, agree, verdict_log, requests):
        use_bt = self.options.bt_reward
        betas = None
        if use_bt and tours:
            n_max = max(len(g) for g in groups)
            m_max = max(max((len(t.matches) for t in tours), default=0), 1)
            data = np.zeros((len(tours), m_max, 3))
            mask = np.zeros((len(tours), m_max), bool)
            for k, t in enumerate(tours):
                if t.matches:
                    data[k, : len(t.matches)] = np.asarray(t.matches, float)
                    mask[k, : len(t.matches)] = True
            betas = newton_soft_pairwise_batched(n_max, data, mask, l2=self.options.l2)  # eq. 10, whole batch at once
        out = []
        for k, (g, t) in enumerate(zip(groups, tours, strict=True)):
            n = len(g)
            cov = t.covered()
            if use_bt:
                beta = np.where(cov, betas[k, :n], np.nan)
                rewards = minmax_normalize(beta)  # Sec. 4: min-max normalised log-strengths
            else:
                rewards = win_rate_pairwise(n, t.matches) if t.matches else np.full(n, np.nan)  # eq. 8
                beta = None
            statuses = [Status.OK if c else Status.INVALID for c in cov]
            messages = [None if c else "no valid tournament match for this trace (every judge call failed)" for c in cov]
            comp = {"judge_calls": requests[k], "pairs_judged": t.calls, "rounds": t.rounds, "invalid_matches": len(t.invalid),
                    "schedule": self.options.schedule, "reward_kind": "bt" if use_bt else "winrate",
                    "order_agreement": float(np.mean(agree[k])) if agree[k] else None}
            extra = {"matches": [list(m) for m in t.matches], "invalid_matches": [list(m) for m in t.invalid],
                     "first_shown_outcomes": firsts[k], "verdicts": verdict_log[k]}
            if beta is not None:
                extra["bt_strengths"] = beta
            out.append((rewards, statuses, messages, comp, extra))
        return out


class TournamentScorer(ArenaScorer):
    """ArenaRL baseline: a trace tournament on every group, no routing (round robin + win-rate by default)."""

    name = "tournament"
    Options = TournamentOptions
    route = False


# -------------------------------------------------------------------------------------- pointwise


@dataclass(frozen=True)
class PointwiseOptions(ArenaJudgeOptions):
    rubric: Literal["rlaif", "adaptive"] = option(
        "rlaif", "rlaif (DeepSeekMath-style rubric) or adaptive (the short Adaptive Pointwise prompt)")
    max_tokens: int = option(1024, "judge generation budget (generate mode)")
    temperature: float = option(0.0, "judge sampling temperature (generate mode)")
    seed: int = option(0, "judge sampling seed")
    use_labels: bool = option(False, "use Group.labels as the verifier reward when present")
    checker: AnswerChecker | None = option(None, "an AnswerChecker for the verifier reward (Python only)")

    def __post_init__(self) -> None:
        super().__post_init__()
        self._at_least(1, "max_tokens")
        self._at_least(0, "temperature")


@dataclass(frozen=True)
class AdaptivePointwiseOptions(PointwiseOptions):
    rubric: Literal["rlaif", "adaptive"] = option(
        "adaptive", "adaptive (the App. D Adaptive Pointwise prompt) or rlaif (DeepSeekMath-style rubric)")


class PointwiseScorer(_ArenaJudge):
    """RLAIF baseline: a rubric judge scores every response 1 / 0.5 / 0 (App. D), no routing.

    In logit mode the reward is the expected score under the judge's 1 / 0.5 / 0 probabilities."""

    name = "pointwise"
    Options = PointwiseOptions
    options: PointwiseOptions
    route = False

    def _score(self, groups: list[Group]) -> list[GroupScore]:
        verified = self._verify(groups)
        comps = [diversity_components(v) for v in verified]
        costs = [v.cost for v in verified]
        if self.route:
            judged = [k for k, c in enumerate(comps) if c["diverse"] is False]
        else:
            judged = list(range(len(groups)))
        prompts, index = [], []
        for k in judged:
            g = groups[k]
            for r_idx, resp in enumerate(g.responses):
                prompts.append(pointwise_prompt(g.prompt, g.reference, self._shown(resp), self.options.rubric))
                index.append((k, r_idx))
        results, call_costs = self._ask(prompts, "point")  # one backend call for the whole batch
        scores = {k: (np.full(len(groups[k]), np.nan), [Status.OK] * len(groups[k]), [None] * len(groups[k]))
                  for k in judged}
        for (k, r_idx), res, c in zip(index, results, call_costs, strict=True):
            costs[k] += c
            r, st, msg = scores[k]
            if res.value is None:
                st[r_idx], msg[r_idx] = res.status, res.message
            else:
                r[r_idx] = res.value
        out = []
        for k, g in enumerate(groups):
            comp = {**comps[k], "routed": k in scores}
            if k in scores:
                r, st, msg = scores[k]
                comp["judge_calls"] = len(g)
                out.append(_finish(g.id, r, st, msg, comp, costs[k]))
            elif not verified[k].available:
                out.append(_finish(g.id, np.full(len(g), np.nan), [Status.ABSTAIN] * len(g),
                                   ["no reference answer or labels: cannot decide routing"] * len(g),
                                   {**comp, "judge_calls": 0}, costs[k]))
            else:
                v = verified[k]
                out.append(_finish(g.id, v.rewards, v.statuses, list(v.messages), {**comp, "judge_calls": 0}, costs[k]))
        return out


class AdaptivePointwiseScorer(PointwiseScorer):
    """Adaptive Pointwise: verifier reward on reward-diverse groups, rubric judge on non-diverse ones (eq. 5)."""

    name = "adaptive-pointwise"
    group_relative = True
    Options = AdaptivePointwiseOptions
    route = True
