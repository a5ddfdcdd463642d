"""Tournament schedules over one group (Reasoning Arena Sec. 4 and ours): which pairs the judge sees.

A tournament is a pure state machine: ``next_round()`` names the pairs (i, j) to judge now (all of one
round can be judged in parallel, and a scorer batches the rounds of every group into one backend call),
``record(pairs, outcomes)`` takes the soft outcomes o_ij for i (None for a judge failure: the match is
dropped and remembered in ``invalid``, never turned into a tie). The fits are in ``rewardkit.arena.ranking``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy.special import expit, ndtr

from rewardkit.arena.ranking import opt_soft_pairwise

__all__ = [
    "Tournament",
    "RoundRobin",
    "LiveTournament",
    "UncertaintyTournament",
    "anchor_opponents",
    "random_opponents",
    "leaderboard",
    "live_win_rates",
    "laplace_pair_information",
    "play",
    "PAIR_CRITERIA",
]

Pair = tuple[int, int]
Match = tuple[int, int, float]
# (new item, items already arrived, valid matches so far, rng) -> opponents for the new item
OpponentSelector = Callable[[int, list[int], list[Match], np.random.Generator], list[int]]


def live_win_rates(items: Sequence[int], matches: Sequence[Match], default: float = 0.5) -> dict[int, float]:
    """Live leaderboard score of each item: mean soft outcome over its valid matches (``default`` if none)."""
    tot: dict[int, float] = {k: 0.0 for k in items}
    cnt: dict[int, int] = {k: 0 for k in items}
    for i, j, o in matches:
        if i in tot:
            tot[i] += o
            cnt[i] += 1
        if j in tot:
            tot[j] += 1.0 - o
            cnt[j] += 1
    return {k: tot[k] / cnt[k] if cnt[k] else default for k in items}


def leaderboard(arrived: Sequence[int], matches: Sequence[Match]) -> list[int]:
    """Arrived items best first by live win rate (eq. 8 over played matches); ties keep arrival order."""
    wr = live_win_rates(arrived, matches)
    pos = {k: p for p, k in enumerate(arrived)}
    return sorted(arrived, key=lambda k: (-wr[k], pos[k]))


def anchor_opponents(new: int, arrived: list[int], matches: list[Match], rng: np.random.Generator) -> list[int]:
    """The paper's live opponents (Sec. 4): current best, worst and median of the live leaderboard.

    With fewer than three arrived items the new one meets all of them (1 + 2 + 3(N-3) calls in all).
    """
    if len(arrived) <= 3:
        return list(arrived)
    lb = leaderboard(arrived, matches)
    return [lb[0], lb[-1], lb[(len(lb) - 1) // 2]]


def random_opponents(k: int = 3) -> OpponentSelector:
    """Baseline: ``k`` opponents drawn uniformly from the arrived items."""

    def select(new: int, arrived: list[int], matches: list[Match], rng: np.random.Generator) -> list[int]:
        if len(arrived) <= k:
            return list(arrived)
        return [int(x) for x in rng.choice(arrived, size=k, replace=False)]

    select.__name__ = f"random_opponents_{k}"
    return select


class Tournament:
    """Base state: valid matches, dropped (invalid) matches, judge calls and rounds so far."""

    def __init__(self, n_items: int):
        self.n_items = n_items
        self.matches: list[Match] = []
        self.invalid: list[tuple[int, int, str]] = []
        self.calls = 0
        self.rounds = 0
        self._pending: list[Pair] = []

    def next_round(self) -> list[Pair]:
        """Pairs to judge now (empty when the tournament is over)."""
        if self._pending:
            raise RuntimeError("tournament: record() the previous round before asking for the next")
        self._pending = [] if self.done else list(self._schedule())
        return list(self._pending)

    def record(self, pairs: Sequence[Pair], outcomes: Sequence[float | None], reasons: Sequence[str | None] | None = None) -> None:
        """Store one round's soft outcomes; ``None`` marks a failed judge call (dropped, kept in ``invalid``)."""
        if sorted(map(tuple, pairs)) != sorted(self._pending):
            raise ValueError("tournament: recorded pairs differ from the round that was scheduled")
        reasons = reasons or [None] * len(pairs)
        for (i, j), o, why in zip(pairs, outcomes, reasons, strict=True):
            self.calls += 1
            if o is None or not np.isfinite(o):
                self.invalid.append((int(i), int(j), why or "invalid judge output"))
            else:
                if not 0.0 <= o <= 1.0:
                    raise ValueError(f"tournament: outcome {o} for pair {(i, j)} is outside [0, 1]")
                self.matches.append((int(i), int(j), float(o)))
        self._pending = []
        self.rounds += 1
        self._after_record()

    def covered(self) -> np.ndarray:
        """True for items with at least one valid match (the others get no reward: status invalid)."""
        c = np.zeros(self.n_items, bool)
        for i, j, _ in self.matches:
            c[i] = c[j] = True
        return c

    @property
    def done(self) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    def _schedule(self) -> list[Pair]:  # pragma: no cover - interface
        raise NotImplementedError

    def _after_record(self) -> None:
        pass


class RoundRobin(Tournament):
    """All C(N, 2) pairs in one round (Sec. 4, "naive tournament")."""

    def __init__(self, n_items: int):
        super().__init__(n_items)
        self._played = False

    @property
    def done(self) -> bool:
        return self._played or self.n_items < 2

    def _schedule(self) -> list[Pair]:
        return [(i, j) for i in range(self.n_items) for j in range(i + 1, self.n_items)]

    def _after_record(self) -> None:
        self._played = True


class LiveTournament(Tournament):
    """Items arrive in ``order``; each new one meets the opponents ``select`` picks among those arrived.

    One round per arrival after the first (N - 1 rounds); with ``anchor_opponents`` at most
    1 + 2 + 3(N - 3) judge calls (18 at N = 8). ``rng`` (for random selectors) defaults to seed 0: runs repeat.
    """

    def __init__(self, n_items: int, order: Sequence[int] | None = None, select: OpponentSelector = anchor_opponents,
                 rng: np.random.Generator | None = None):
        super().__init__(n_items)
        self.order = list(range(n_items)) if order is None else [int(k) for k in order]
        if sorted(self.order) != list(range(n_items)):
            raise ValueError(f"live tournament: order {self.order} is not a permutation of 0..{n_items - 1}")
        self.select = select
        self.rng = rng or np.random.default_rng(0)
        self._next = 1  # position in ``order`` of the next arrival

    @property
    def done(self) -> bool:
        return self._next >= self.n_items

    def _schedule(self) -> list[Pair]:
        while not self.done:
            new, arrived = self.order[self._next], self.order[: self._next]
            opp = list(dict.fromkeys(self.select(new, arrived, self.matches, self.rng)))
            if opp:
                return [(new, o) for o in opp]
            self._next += 1  # a selector may decline to match an arrival
        return []

    def _after_record(self) -> None:
        self._next += 1


PAIR_CRITERIA = ("information", "order")


def _check_criterion(criterion: str) -> None:
    """Refuse an unknown pair criterion (a typo would otherwise silently run the "information" one)."""
    if criterion not in PAIR_CRITERIA:
        raise ValueError(f"pair criterion must be one of {PAIR_CRITERIA}, got {criterion!r}")


def laplace_pair_information(beta: np.ndarray, matches: Sequence[Match], l2: float, criterion: str = "information") -> np.ndarray:
    """p(1-p) * Var(b_i - b_j) for every pair under the Laplace posterior of the regularised BT fit.

    ``log(1 + p(1-p) Var)`` is the expected information one more comparison of (i, j) gives about
    b_i - b_j; it is largest for close, poorly-measured pairs: exactly those that decide the ranking.
    ``criterion="order"`` gives instead Phi(-|b_i - b_j| / sd), the posterior chance the pair is misordered.
    """
    _check_criterion(criterion)
    n = len(beta)
    H = l2 * np.eye(n)
    for i, j, _ in matches:
        p = expit(beta[i] - beta[j])
        w = 2.0 * p * (1 - p)  # mirrored match counts twice (eq. 10)
        H[i, i] += w
        H[j, j] += w
        H[i, j] -= w
        H[j, i] -= w
    S = np.linalg.inv(H)
    d = np.diag(S)
    var = d[:, None] + d[None, :] - 2 * S
    if criterion == "order":
        z = np.abs(beta[:, None] - beta[None, :]) / np.sqrt(np.maximum(var, 1e-12))
        return ndtr(-z)
    P = expit(beta[:, None] - beta[None, :])
    return P * (1 - P) * var


class UncertaintyTournament(Tournament):
    """Our strategy: rounds of disjoint pairs chosen where the current BT estimate is least certain.

    Round 1 is a random perfect matching (every item plays once). Each later round refits eq. 10 and
    greedily picks unplayed pairs by ``laplace_pair_information`` (each item at most once per round, so a
    round is one parallel batch), until ``budget`` judge calls are spent. All items must have arrived.
    ``rng`` defaults to seed 0 (runs repeat); ``l2`` must be > 0: round 1 leaves the comparison graph
    disconnected, so the plain MLE (l2 = 0) and its Laplace posterior do not exist.
    """

    def __init__(self, n_items: int, budget: int | None = None, l2: float = 1.0, rng: np.random.Generator | None = None,
                 criterion: str = "information"):
        super().__init__(n_items)
        _check_criterion(criterion)
        if not l2 > 0:
            raise ValueError(f"uncertainty tournament: l2 must be > 0 (its Laplace posterior needs the prior), got {l2}")
        self.criterion = criterion
        self.budget = 2 * n_items if budget is None else int(budget)
        self.l2 = l2
        self.rng = rng or np.random.default_rng(0)
        self._tried: set[Pair] = set()

    @property
    def done(self) -> bool:
        all_pairs = self.n_items * (self.n_items - 1) // 2
        return self.calls >= self.budget or len(self._tried) >= all_pairs or self.n_items < 2

    def _schedule(self) -> list[Pair]:
        left = self.budget - self.calls
        if self.rounds == 0:
            perm = [int(x) for x in self.rng.permutation(self.n_items)]
            pairs = [(perm[k], perm[k + 1]) for k in range(0, self.n_items - 1, 2)]
        else:
            beta = opt_soft_pairwise(self.n_items, self.matches, l2=self.l2) if self.matches else np.zeros(self.n_items)
            info = laplace_pair_information(beta, self.matches, self.l2, self.criterion)
            cand = [(info[i, j], self.rng.random(), i, j) for i in range(self.n_items)
                    for j in range(i + 1, self.n_items) if (i, j) not in self._tried]
            cand.sort(reverse=True)
            used: set[int] = set()
            pairs = []
            for _, _, i, j in cand:
                if i not in used and j not in used:
                    pairs.append((i, j))
                    used |= {i, j}
        pairs = pairs[: max(left, 0)]
        self._tried |= {(min(i, j), max(i, j)) for i, j in pairs}
        return pairs


def play(tournament: Tournament, judge: Callable[[int, int], float | None]) -> Tournament:
    """Run a tournament to the end with a per-pair ``judge(i, j) -> o_ij`` (simulations and tests)."""
    while True:
        pairs = tournament.next_round()
        if not pairs:
            return tournament
        tournament.record(pairs, [judge(i, j) for i, j in pairs])
