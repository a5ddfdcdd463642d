"""GAR (Generative Adversarial Reasoner, sec. 3, App. B and D): the slice discriminator scorer.

``SliceScorer`` (``--scorer slices``) slices every response of every group (``rewardkit.gar.slicing``),
sends all slices of the whole batch to the backend in one call (App. B prompt, output capped at K = 128
tokens, or verdict-logit mode P(YES)), and combines R^s with the exact-match verifier R^m (the pure
rewards are in ``rewardkit.gar.rewards``; the holistic baseline in ``rewardkit.gar.holistic``).

An unparseable discriminator output makes that slice ``invalid``: it is left out of R^s (the mean runs
over valid slices) and is never counted as NO; a response is invalid only when none of its slices is valid.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from rewardkit.answers import AnswerChecker
from rewardkit.backends.base import ChatRequest, VerdictRequest, cost_of
from rewardkit.gar.rewards import (
    alignment_reward,
    discriminator_reward,
    gan_reward,
    gan_slice_terms,
    reasoner_reward,
    slice_mean,
)
from rewardkit.gar.slicing import DEFAULT_SLICE_TOKENS, Slice, make_slices
from rewardkit.options import option
from rewardkit.prompts.gar import VERDICT_CHOICES, VERDICT_PREFIX, discriminator_messages
from rewardkit.scoring import JudgeOptions, JudgeScorer, VerdictMode
from rewardkit.types import Cost, Group, GroupScore, Status
from rewardkit.verdicts import parse_yes_no
from rewardkit.verifier import make_checker, verify_groups

# ------------------------------------------------------------------------------------- the scorer


@dataclass
class SliceJudgment:
    """The discriminator's judgment of one slice: verdict, P(YES) in logit mode, raw output, status."""

    status: Status
    verdict: str | None = None  # "YES" / "NO"
    p_yes: float | None = None  # verdict-logit mode
    output: str = ""  # generate mode: analysis, **YES**/**NO**, rationale
    message: str | None = None
    cost: Cost = field(default_factory=Cost)

    @property
    def rationale(self) -> str:
        """The text after the first **YES**/**NO**, the verdict (the App. B rationale follows it)."""
        parts = re.split(r"\*\*\s*(?:YES|NO)\s*\*\*", self.output, maxsplit=1, flags=re.IGNORECASE)
        return parts[-1].strip() if len(parts) > 1 else ""

    def score(self, soft: bool = False, threshold: float = 0.5) -> float | None:
        """r^s in {0, 1} (or P(YES) when ``soft`` in logit mode); None when the slice is not valid."""
        if self.status is not Status.OK:
            return None
        if self.p_yes is not None:
            return self.p_yes if soft else float(self.p_yes >= threshold)
        return 1.0 if self.verdict == "YES" else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status.value, "verdict": self.verdict, "p_yes": self.p_yes,
                "output": self.output, "rationale": self.rationale, "message": self.message}


@dataclass(frozen=True)
class SliceItem:
    """One slice to judge: the problem, the slice text and optional earlier reasoning as context."""

    problem: str
    text: str
    context: str = ""


@dataclass(frozen=True)
class DiscriminatorOptions(JudgeOptions):
    """The options of every GAR discriminator scorer: the verdict, and how it combines with exact match."""

    mode: VerdictMode = option(
        "generate", "generate (App. B analysis, **YES**/**NO**, rationale; capped at max_tokens) or logit (P(YES))")
    max_tokens: int = option(128, "K = 128 (sec. 3), the cap on the discriminator's output tokens in generate mode")
    temperature: float = option(0.0, "discriminator sampling temperature in generate mode")
    lambda1: float = option(1.0, "weight of the exact-match reward R^m (0 turns the verifier off)")
    lambda2: float = option(1.0, "weight of the slice reward R^s")
    soft: bool = option(False, "in logit mode use r^s = P(YES) instead of 1[P(YES) >= threshold]")
    threshold: float = option(0.5, "P(YES) at or above which a slice counts as YES in logit mode")
    checker: AnswerChecker | None = option(None, "an AnswerChecker for the exact-match reward (Python only)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.lambda1 < 0 or self.lambda2 < 0:
            raise ValueError(f"option 'lambda1'/'lambda2': must be >= 0, got {self.lambda1}, {self.lambda2}")
        self._at_least(1, "max_tokens")
        self._at_least(0, "temperature")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"option 'threshold': must lie in [0, 1], got {self.threshold}")


@dataclass(frozen=True)
class SliceOptions(DiscriminatorOptions):
    slice_tokens: int = option(DEFAULT_SLICE_TOKENS, "slice token budget L (counted with the backend's tokenizer)")
    min_slice_tokens: int | None = option(None, "a slice closes at a clear new beginning only once it holds this many tokens (default 3/4 of slice_tokens, rewardkit's threshold: the paper gives none; keeps slices near L, App. D.2)")
    segmentation: Literal["delimiters", "fixed"] = option(
        "delimiters", "delimiters (the paper's slicing) or fixed (fixed-length windows ablation)")
    partial: bool = option(False, "judge only the first partial_slices slices and drop R^m (paper Table 5)")
    partial_slices: int = option(3, "n, the number of slices judged in partial-trace mode")
    context: bool = option(False, "show the discriminator the trace's earlier slices as context")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.partial and self.partial_slices < 1:
            raise ValueError(f"option 'partial_slices': must be >= 1, got {self.partial_slices}")
        self._at_least(1, "slice_tokens")
        self._at_least(0, "min_slice_tokens")


class DiscriminatorScorer(JudgeScorer):
    """What GAR's discriminator scorers share (``slices`` and ``holistic``): R^rea = lambda1 * R^m + lambda2 *
    R^s, with R^s the mean score of the judged pieces of a trace, every piece of a batch in ONE backend call.
    A subclass says what one judgment covers (``slices``)."""

    Options = DiscriminatorOptions
    options: DiscriminatorOptions

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """The discriminator's token counts (whitespace words when the backend has no tokenizer)."""
        return list(self.judge.count_tokens(texts))

    def slices(self, text: str) -> list[Slice]:  # pragma: no cover - interface
        """The pieces of one trace the discriminator judges."""
        raise NotImplementedError

    def judged(self, text: str) -> list[tuple[Slice, str]]:
        """The pieces of one trace judged for its reward, each with the context shown before it."""
        return [(s, "") for s in self.slices(text)]

    def uses_exact_match(self) -> bool:
        """Whether R^m enters the reward (lambda1 > 0)."""
        return self.options.lambda1 > 0

    def judge_slices(self, items: Sequence[SliceItem]) -> list[SliceJudgment]:
        """Judge every slice with ONE backend call (generate: App. B prompt, K tokens; logit: P(YES))."""
        if not items:
            return []
        msgs = [discriminator_messages(it.problem, it.text, it.context) for it in items]
        o = self.options
        out: list[SliceJudgment] = []
        if self.verdict_mode == "logit":
            vres = self.judge.verdict_probs(
                [VerdictRequest(m, VERDICT_CHOICES, VERDICT_PREFIX) for m in msgs]
            )
            for r in vres:
                c = cost_of([r])
                if r.status is not Status.OK:  # named like a failed generate call when the backend gave no text
                    out.append(SliceJudgment(Status(r.status), message=r.error or f"judge call {r.status}", cost=c))
                    continue
                if len(r.probs) != 2:
                    out.append(SliceJudgment(Status.ERROR, message=f"verdict_probs returned {len(r.probs)} probs",
                                             cost=c))
                    continue
                p = float(r.probs[0])
                out.append(SliceJudgment(Status.OK, "YES" if p >= o.threshold else "NO", p, cost=c))
            return out
        reqs = [ChatRequest(m, max_tokens=o.max_tokens, temperature=o.temperature) for m in msgs]
        comps = self.judge.generate(reqs)
        for comp in comps:
            c = cost_of([comp])
            if comp.status is not Status.OK:
                out.append(SliceJudgment(comp.status, message=comp.error or f"judge call {comp.status}", cost=c))
                continue
            v = parse_yes_no(comp.text, comp.finish_reason())  # invalid output -> invalid slice, never a NO
            out.append(SliceJudgment(v.status, v.label, None, comp.text, v.message, cost=c))
        return out

    # -- scoring
    def _score(self, groups: list[Group]) -> list[GroupScore]:
        o = self.options
        use_m = self.uses_exact_match()
        # 1. slice every response of every group
        plan: list[list[list[Slice]]] = []
        items: list[SliceItem] = []
        for g in groups:
            per_resp = []
            for r in g.responses:
                units = self.judged(r)
                per_resp.append([s for s, _ in units])
                items += [SliceItem(g.prompt, s.text, ctx) for s, ctx in units]
            plan.append(per_resp)
        # 2. one backend call for all slices of the batch; one verifier call for all responses (R^m)
        judgments = iter(self.judge_slices(items))
        verified = verify_groups(groups, make_checker(checker=o.checker)) if use_m else None
        # 3. per-response rewards
        out = []
        for gi, (g, per_resp) in enumerate(zip(groups, plan, strict=True)):
            v = verified[gi] if verified is not None else None
            cost = Cost() if v is None else Cost() + v.cost
            rewards, statuses, messages = [], [], []
            comp: dict[str, list] = {"exact_match": [], "slice_mean": [], "n_slices": [], "n_valid_slices": []}
            detail = []
            for ri, r_slices in enumerate(per_resp):
                js = [next(judgments) for _ in r_slices]
                for j in js:
                    cost += j.cost
                scores = [j.score(o.soft, o.threshold) for j in js]
                rs = slice_mean(scores)
                detail.append([{"text": s.text, "start": s.start, "end": s.end, "tokens": s.tokens,
                                "score": sc, **j.to_dict()} for s, j, sc in zip(r_slices, js, scores, strict=True)])
                n_valid = sum(sc is not None for sc in scores)
                comp["n_slices"].append(len(r_slices))
                comp["n_valid_slices"].append(n_valid)
                comp["slice_mean"].append(rs)
                status, msg = Status.OK, None
                if not r_slices:
                    status, msg = Status.INVALID, "empty response: nothing to slice"
                elif n_valid == 0:
                    bad = {j.status for j in js}
                    status = next((s for s in (Status.TIMEOUT, Status.ERROR) if s in bad), Status.INVALID)
                    msg = f"no valid slice verdict out of {len(js)}: " + "; ".join(
                        sorted({j.message or str(j.status) for j in js}))[:500]
                rm = math.nan
                if v is not None:
                    if not v.available:
                        if status is Status.OK:
                            status, msg = Status.ABSTAIN, "no reference answer for exact match R^m (set lambda1=0)"
                    elif v.statuses[ri] is not Status.OK:
                        if status is Status.OK:
                            status, msg = v.statuses[ri], v.messages[ri]
                    else:
                        rm = float(v.rewards[ri])
                comp["exact_match"].append(rm)
                reward = math.nan
                if status is Status.OK:
                    reward = reasoner_reward(rm if use_m else 0.0, rs, o.lambda1 if use_m else 0.0, o.lambda2)
                rewards.append(reward)
                statuses.append(status)
                messages.append(msg)
            out.append(GroupScore(g.id, np.array(rewards, dtype=np.float64), statuses, comp, cost, messages,
                                  extra={"slices": detail}))
        return out

    # -- discriminator training signal
    def discriminator_objective(
        self, groups: Sequence[Group], lambda3: float = 1.0, lambda4: float = 0.5
    ) -> dict[str, Any]:
        """R^d, R^a and R^dis (sec. 3) for one batch, with ONE backend call for every slice.

        Reference slices come from each group's ``expert`` solution (p_ref), generated slices from its
        responses (p_gen); M_d(x) is P(YES) in logit mode, the hard verdict (clipped) in generate mode.
        R^a uses each response's exact-match correctness against ``group.reference`` (responses whose check
        fails, or groups without a reference, are left out of R^a). Also returns the per-slice terms.
        """
        items, kinds = [], []  # kinds: ("ref", group) or ("gen", group, response)
        for gi, g in enumerate(groups):
            for s in self.slices(g.expert or ""):
                items.append(SliceItem(g.prompt, s.text))
                kinds.append(("ref", gi, -1))
            for ri, r in enumerate(g.responses):
                for s in self.slices(r):
                    items.append(SliceItem(g.prompt, s.text))
                    kinds.append(("gen", gi, ri))
        judged = self.judge_slices(items)
        p = [j.p_yes if j.p_yes is not None else j.score() for j in judged]
        is_ref = [k[0] == "ref" for k in kinds]
        correct: dict[tuple[int, int], bool] = {}
        for gi, v in enumerate(verify_groups(groups, make_checker(checker=self.options.checker))):
            for ri, r in enumerate(v.rewards):
                if v.available and v.statuses[ri] is Status.OK:
                    correct[(gi, ri)] = bool(r)
        by_trace: dict[tuple[int, int], list[float | None]] = {}
        for (kind, gi, ri), pi in zip(kinds, p, strict=True):
            if kind == "gen" and (gi, ri) in correct:
                by_trace.setdefault((gi, ri), []).append(pi)
        keys = list(by_trace)
        r_d = gan_reward([x for x, f in zip(p, is_ref, strict=True) if f], [x for x, f in zip(p, is_ref, strict=True) if not f])
        r_a = alignment_reward([by_trace[k] for k in keys], [correct[k] for k in keys])
        return {
            "R_d": r_d, "R_a": r_a,
            # no correctness label at all: R^a is undefined, so R^dis is too unless lambda4 = 0
            "R_dis": discriminator_reward(r_d, 0.0 if lambda4 == 0 else r_a, lambda3, lambda4),
            "p_real": p, "is_reference": is_ref, "gan_terms": gan_slice_terms(p, is_ref).tolist(),
            "statuses": [j.status.value for j in judged], "cost": Cost.total(j.cost for j in judged),
        }


class SliceScorer(DiscriminatorScorer):
    """GAR reasoner reward: R^rea = lambda1 * R^m + lambda2 * R^s with R^s the discriminator's mean slice score."""

    name = "slices"
    Options = SliceOptions
    options: SliceOptions

    def slices(self, text: str) -> list[Slice]:
        """Slice one trace with this scorer's segmentation and budget."""
        o = self.options
        return make_slices(text, o.segmentation, o.slice_tokens, self.count_tokens, o.min_slice_tokens)

    def judged(self, text: str) -> list[tuple[Slice, str]]:
        """The slices judged for the reward: the first ``partial_slices`` in partial-trace mode (Table 5),
        each with the trace before it as context when ``context`` is set."""
        o = self.options
        sl = self.slices(text)[: o.partial_slices] if o.partial else self.slices(text)
        return [(s, text[: s.start] if o.context and j else "") for j, s in enumerate(sl)]

    def uses_exact_match(self) -> bool:
        """Partial-trace mode drops R^m (Table 5)."""
        return self.options.lambda1 > 0 and not self.options.partial
