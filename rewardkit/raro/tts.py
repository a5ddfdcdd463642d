"""Test-time scaling with a pairwise judge: RARO's single-elimination tournament (Algorithm 3, App. C.5),
a Bradley-Terry selection fit on the matches played, and the baselines (majority vote, random, oracle).

The selection logic is pure and works over any *pairwise judge*: a callable that takes a batch of matches
and returns K votes ("A", "B", "tie", or None for an unparseable vote) per match. Every round of every
problem is handed to the judge at once, so a model backend sees one batch per tournament round.
Model judges (the RARO critic prompt, the Reasoning Arena tournament prompt) are built by :class:`PromptJudge`.
:class:`TTSOptions` is the one configuration of the judge, the selection and its evaluation
(``rewardkit.evals.tts``, ``rewardkit tts``); its defaults are the paper's.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from rewardkit.backends.base import ChatRequest, JudgeBackend, Message, VerdictRequest, cost_of
from rewardkit.options import Options, option, resolve_options
from rewardkit.prompts import arena as arena_prompts
from rewardkit.prompts.raro import VERDICT_CHOICES, VERDICT_PREFIX
from rewardkit.raro.critic import View, answer_view, critic_messages
from rewardkit.scoring import VerdictMode, resolve_mode
from rewardkit.types import Cost
from rewardkit.verdicts import parse_answer_choice, parse_boxed_choice

Ballot = Literal["A", "B", "tie"] | None  # one judge vote; None: the output could not be parsed (or the call failed)
Rule = Literal["paper", "plurality"]
PairwisePrompt = Literal["critic", "tournament"]  # RARO's critic prompt; Reasoning Arena's App. D tournament prompt
Order = Literal["fixed", "alternate"]
Method = Literal["tournament", "bt"]
BTSchedule = Literal["tournament", "round_robin"]


@dataclass(frozen=True)
class TTSOptions(Options):
    """Test-time selection with a pairwise judge, and its evaluation.

    The defaults are RARO's Algorithm 3 setting (App. C.5 and the paper's experiments): the critic writes
    its reasoning before the verdict (``mode="generate"``, a 2048-token budget), K = 4 sampled votes per
    match, the pair shown in the printed order (``order="fixed"``), the paper's match rule, single
    elimination. rewardkit's additions are opt-in and say so in their help: ``mode="logit"``,
    ``order="alternate"``, ``rule="plurality"`` and ``"bt"`` selection.
    """

    prompt: PairwisePrompt = option("critic", "pairwise prompt: critic (RARO App. E) or tournament (Reasoning Arena "
                                              "App. D, without its reference block: a selector sees no label)")
    mode: VerdictMode = option("generate", "generate: the judge reasons, then votes (Algorithm 3); logit (rewardkit's "
                                           "addition): K votes drawn from the verdict probabilities, no reasoning; "
                                           "auto: logit for the embedded SmolLM2 judge, generate for any other")
    max_tokens: int = option(2048, "judge generation budget in generate mode (2048, as in the paper's experiments)")
    temperature: float = option(1.0, "judge sampling temperature in generate mode (the K votes are samples)")
    k: int = option(4, "K, votes per match (Algorithm 3; the paper uses 4)")
    order: Order = option("fixed", "fixed: (y_A, y_B) as Algorithm 3 prints it; alternate (rewardkit's addition): "
                                   "the pair swapped for odd votes, to cancel a judge's position bias")
    rule: Rule = option("paper", "match rule: paper (A wins iff v_A > K/2, else B: Algorithm 3 line 8) or plurality "
                                 "(rewardkit's addition: more votes wins, equal keeps A)")
    methods: tuple[Method, ...] = option(("tournament",), "selectors: tournament (Algorithm 3, single elimination); "
                                                          "bt (rewardkit's addition: Bradley-Terry on the votes)")
    bt_schedule: BTSchedule = option("tournament", "bt: fit on the tournament's matches or play a round_robin")
    view: View = option("answer", "what the judge sees of a response: answer (no <think>), final (the boxed "
                                  "answer) or full")
    template: str = option("math", "critic prompt template: math (the paper's) or general")
    seed: int = option(0, "seed of the judge's sampling (generate) or of the vote draws (logit)")
    skip_uniform: bool = option(True, "do not judge pools whose labels are all equal (every pick has the same "
                                      "correctness, so accuracy is unchanged)")

    def __post_init__(self) -> None:
        super().__post_init__()
        self._at_least(1, "k", "max_tokens")
        self._at_least(0, "temperature")
        if not self.methods:
            raise ValueError("option 'methods': name at least one selector (tournament, bt)")


@dataclass(frozen=True)
class Pairing:
    """One tournament pairing: candidate ``a`` (shown as A / answer 1) against candidate ``b`` for problem ``problem``."""

    problem: int
    a: int
    b: int


class PairwiseJudge(Protocol):
    """``judge(matches, k) -> votes``: ``k`` votes per match, each "A", "B", "tie" or None (invalid)."""

    def __call__(self, matches: Sequence[Pairing], k: int) -> list[list[Ballot]]: ...


@dataclass
class PairingResult:
    match: Pairing
    votes: list[Ballot]
    winner: int
    status: Literal["ok", "split", "invalid"]  # split: no majority; invalid: no valid vote at all
    round: int


@dataclass
class Selection:
    """The chosen candidate of one problem and the matches that chose it."""

    problem: int
    winner: int
    matches: list[PairingResult] = field(default_factory=list)
    scores: list[float] | None = None  # BT strengths, when selected by Bradley-Terry


# --------------------------------------------------------------------------------- match decisions


def decide(votes: Sequence[Ballot], k: int, rule: Rule = "paper") -> tuple[bool, str]:
    """Does A win this match? Returns (a_wins, status).

    ``paper`` is Algorithm 3 line 8 literally: A wins iff v_A > K/2, otherwise B (so a split or tied vote
    goes to B). ``plurality``: the side with more votes wins; equal counts keep A (the earlier candidate).
    In both rules a match without a single valid vote is *not* decided by the rule or a coin: it keeps the
    earlier candidate A (stable order fallback) with status "invalid", which is reported.
    """
    valid = [v for v in votes if v is not None]
    if not valid:
        return True, "invalid"
    v_a, v_b = valid.count("A"), valid.count("B")
    if rule == "paper":
        a_wins = v_a > k / 2  # Algorithm 3, line 8
        return a_wins, "ok" if (a_wins or v_b > k / 2) else "split"
    if rule == "plurality":
        if v_a == v_b:
            return True, "split"
        return v_a > v_b, "ok"
    raise ValueError(f"unknown match rule {rule!r}; use 'paper' or 'plurality'")


# --------------------------------------------------------------------------- Algorithm 3 (batched)


def single_elimination(pools: Sequence[Sequence[int]], judge: PairwiseJudge, k: int = 4,
                       rule: Rule = "paper") -> list[Selection]:
    """Algorithm 3 for many problems at once: pair candidates in order, K votes per match, majority wins,
    the odd one out gets a bye; all matches of one round (across problems) go to the judge together."""
    if k < 1:
        raise ValueError(f"votes per match k must be >= 1, got {k}")
    current = [list(p) for p in pools]
    if any(len(p) == 0 for p in current):
        raise ValueError("single_elimination: every problem needs at least one candidate")
    out = [Selection(i, -1) for i in range(len(current))]
    rnd = 0
    while any(len(p) > 1 for p in current):
        matches = [Pairing(i, p[j], p[j + 1]) for i, p in enumerate(current) for j in range(0, len(p) - 1, 2)]
        votes = judge(matches, k)
        if len(votes) != len(matches):
            raise RuntimeError(f"pairwise judge returned {len(votes)} vote lists for {len(matches)} matches")
        won: dict[tuple[int, int], int] = {}
        for m, v in zip(matches, votes, strict=True):
            a_wins, status = decide(v, k, rule)
            w = m.a if a_wins else m.b
            won[(m.problem, m.a)] = w
            out[m.problem].matches.append(PairingResult(m, list(v), w, status, rnd))
        nxt = []
        for i, p in enumerate(current):
            q = [won[(i, p[j])] for j in range(0, len(p) - 1, 2)]
            if len(p) % 2:
                q.append(p[-1])  # bye (Algorithm 3 line 4)
            nxt.append(q)
        current = nxt
        rnd += 1
    for i, p in enumerate(current):
        out[i].winner = p[0]
    return out


# ------------------------------------------------------------------------------- Bradley-Terry


def round_robin(pools: Sequence[Sequence[int]], judge: PairwiseJudge, k: int = 4) -> list[list[PairingResult]]:
    """Every pair of every pool, all in one judge batch."""
    matches = [Pairing(i, p[x], p[y]) for i, p in enumerate(pools) for x in range(len(p)) for y in range(x + 1, len(p))]
    votes = judge(matches, k) if matches else []
    out: list[list[PairingResult]] = [[] for _ in pools]
    for m, v in zip(matches, votes, strict=True):
        a_wins, status = decide(v, k, "plurality")
        out[m.problem].append(PairingResult(m, list(v), m.a if a_wins else m.b, status, 0))
    return out


def vote_matches(results: Sequence[PairingResult], pool: Sequence[int]) -> np.ndarray:
    """Every valid vote as a soft match ``(i, j, o_ij)`` over pool positions: A -> 1, B -> 0, tie -> 1/2."""
    idx = {c: j for j, c in enumerate(pool)}
    o = {"A": 1.0, "B": 0.0, "tie": 0.5}
    rows = [(idx[r.match.a], idx[r.match.b], o[v]) for r in results for v in r.votes if v is not None]
    return np.asarray(rows, dtype=np.float64).reshape(-1, 3)


def bt_select(pools: Sequence[Sequence[int]], judge: PairwiseJudge, k: int = 4,
              schedule: Literal["tournament", "round_robin"] = "tournament", rule: Rule = "paper",
              l2: float = 0.02) -> list[Selection]:
    """Pick the candidate with the highest Bradley-Terry strength fit on the votes of the matches played.

    ``tournament`` fits on the single-elimination matches (no extra judge calls: each vote counts, not just
    the match winner); ``round_robin`` plays all N(N-1)/2 pairs. The fit is ``rewardkit.arena.ranking.bradley_terry``
    (L-BFGS, ridge ``l2`` so an undefeated candidate keeps a finite strength). Equal strengths keep the
    earlier candidate.
    """
    from rewardkit.arena.ranking import bradley_terry

    if schedule == "tournament":
        played = [s.matches for s in single_elimination(pools, judge, k, rule)]
    elif schedule == "round_robin":
        played = round_robin(pools, judge, k)
    else:
        raise ValueError(f"unknown BT schedule {schedule!r}")
    out = []
    for i, (pool, ms) in enumerate(zip(pools, played, strict=True)):
        data = vote_matches(ms, pool)
        s = bradley_terry(len(pool), data, l2=l2, mirror=False) if len(pool) > 1 else np.zeros(1)
        best = int(np.flatnonzero(s >= s.max() - 1e-9)[0])
        out.append(Selection(i, pool[best], ms, s.tolist()))
    return out


# --------------------------------------------------------------------------------- model judges


class CachedJudge:
    """Memoises votes per (problem, a, b, k) so N = 1, 2, 4, 8 tournaments share their common matches."""

    def __init__(self, judge: PairwiseJudge):
        self.judge = judge
        self.cache: dict[tuple[int, int, int, int], list[Ballot]] = {}
        self.hits = 0

    def __call__(self, matches: Sequence[Pairing], k: int) -> list[list[Ballot]]:
        todo = [m for m in dict.fromkeys(matches) if (m.problem, m.a, m.b, k) not in self.cache]
        if todo:
            for m, v in zip(todo, self.judge(todo, k), strict=True):
                self.cache[(m.problem, m.a, m.b, k)] = v
        self.hits += len(matches) - len(todo)
        return [list(self.cache[(m.problem, m.a, m.b, k)]) for m in matches]


def _tournament_messages(question: str, a: str, b: str, reference: str | None) -> list[Message]:
    """The Reasoning Arena App. D tournament prompt; a test-time selector passes no reference (the label)."""
    return [{"role": "user", "content": arena_prompts.tournament_prompt(question, reference, a, b)}]


def _critic_vote(text: str, finish_reason: str | None = None) -> Ballot:
    v = parse_answer_choice(text, finish_reason)
    return None if not v.ok else {"1": "A", "2": "B", "tie": "tie"}[v.label]


def _tournament_vote(text: str, finish_reason: str | None = None) -> Ballot:
    v = parse_boxed_choice(text, ("A", "B", "Tie"), finish_reason)
    return None if not v.ok else {"A": "A", "B": "B", "Tie": "tie"}[v.label]


class PromptJudge:
    """A pairwise judge from a backend and a prompt (``TTSOptions.prompt``): the RARO critic (App. E input
    format) or the Reasoning Arena App. D tournament prompt.

    ``mode="generate"`` samples K judge outputs per match and parses each; ``mode="logit"`` scores the
    verdicts in one forward pass per orientation and draws the K votes from those probabilities with a
    seeded RNG (sampling the verdict at temperature 1, without the reasoning). ``order="alternate"`` shows
    the pair as (a, b) for even votes and (b, a) for odd ones and maps the votes back, to cancel a judge's
    position bias; ``"fixed"`` is Algorithm 3 as printed (always (y_A, y_B)). ``PromptJudge(..., options)``,
    ``PromptJudge(..., mode="logit")`` or both, as for scorers.
    """

    def __init__(self, backend: JudgeBackend, questions: Sequence[str], candidates: Sequence[Sequence[str]],
                 options: TTSOptions | None = None, /, *, references: Sequence[str | None] | None = None,
                 **fields: Any):
        self.options = resolve_options(TTSOptions, options, fields, "PromptJudge")
        self.backend, self.questions, self.candidates = backend, list(questions), [list(c) for c in candidates]
        self.references = list(references) if references is not None else None
        self.cost = Cost()
        self.calls = 0  # backend calls (one per round)
        # generate mode: every judge output with what it was read as, so a run's verdicts can be re-read and checked
        self.outputs: list[dict[str, Any]] = []

    def _messages(self, problem: int, first: int, second: int) -> list[Message]:
        o = self.options
        q = self.questions[problem]
        x = answer_view(self.candidates[problem][first], o.view)
        y = answer_view(self.candidates[problem][second], o.view)
        if o.prompt == "critic":
            return critic_messages(q, x, y, o.template)
        ref = self.references[problem] if self.references else None
        return _tournament_messages(q, x, y, ref)

    def _orientations(self, k: int) -> list[tuple[bool, int]]:
        """(swapped, number of votes) per orientation of one match."""
        if self.options.order == "fixed":
            return [(False, k)]
        return [(s, n) for s, n in ((False, (k + 1) // 2), (True, k // 2)) if n > 0]

    def __call__(self, matches: Sequence[Pairing], k: int) -> list[list[Ballot]]:
        o = self.options
        plan = [(m, sw, n) for m in matches for sw, n in self._orientations(k)]
        msgs = [self._messages(m.problem, m.b, m.a) if sw else self._messages(m.problem, m.a, m.b)
                for m, sw, _ in plan]
        self.calls += 1
        votes: dict[Pairing, list[Ballot]] = {m: [] for m in matches}
        if resolve_mode(o.mode, self.backend) == "logit":
            if o.prompt == "critic":
                choices, prefix, labels = VERDICT_CHOICES, VERDICT_PREFIX, ("A", "B", "tie")
            else:
                choices, prefix, labels = ("A", "B", "Tie"), "\\boxed{", ("A", "B", "tie")
            res = self.backend.verdict_probs([VerdictRequest(x, choices, prefix) for x in msgs])
            for (m, sw, n), r in zip(plan, res, strict=True):
                if r.status.value != "ok":
                    votes[m].extend([None] * n)
                    continue
                rng = np.random.default_rng([o.seed, m.problem, m.a, m.b, int(sw)])
                draws = rng.choice(3, size=n, p=np.asarray(r.probs, float) / np.sum(r.probs))
                votes[m].extend(_swap(labels[d], sw) for d in draws)
        else:
            parse = _critic_vote if o.prompt == "critic" else _tournament_vote
            # one seed per round (not per request) so the backend can pack the round into few batches
            seed = _seed(o.seed, self.calls)
            reqs = [ChatRequest(x, max_tokens=o.max_tokens, temperature=o.temperature, n=n, seed=seed)
                    for x, (_, _, n) in zip(msgs, plan, strict=True)]
            res = self.backend.generate(reqs)
            for (m, sw, n), r in zip(plan, res, strict=True):
                texts = r.texts if r.status.value == "ok" else []
                got = [_swap(parse(t, r.finish_reason(i)), sw) for i, t in enumerate(texts[:n])]
                self.outputs += [{"problem": m.problem, "shown": [m.b, m.a] if sw else [m.a, m.b], "text": t,
                                  "finish_reason": r.finish_reason(i), "vote": v}
                                 for i, (t, v) in enumerate(zip(texts[:n], got, strict=True))]
                votes[m].extend(got + [None] * (n - len(got)))
        self.cost += cost_of(res)
        return [_interleave(votes[m], k, o.order) for m in matches]


def _seed(seed: int, call: int) -> int:
    return zlib.crc32(f"{seed}:{call}".encode())


def _swap(v: Ballot, swapped: bool) -> Ballot:
    if not swapped or v in (None, "tie"):
        return v
    return "B" if v == "A" else "A"


def _interleave(v: list[Ballot], k: int, order: str) -> list[Ballot]:
    """Votes in (even: original order, odd: swapped) order, as documented for ``order='alternate'``."""
    if order == "fixed":
        return v[:k]
    n0 = (k + 1) // 2
    first, second = v[:n0], v[n0:]
    out: list[Ballot] = []
    for i in range(k):
        out.append(first[i // 2] if i % 2 == 0 else second[i // 2])
    return out
