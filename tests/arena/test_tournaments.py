"""Tournament schedules (Reasoning Arena Sec. 4 and the uncertainty schedule): pure state machines."""

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import expit
from scipy.stats import norm

from rewardkit.arena.ranking import opt_soft_pairwise
from rewardkit.arena.tournaments import (
    LiveTournament,
    RoundRobin,
    UncertaintyTournament,
    anchor_opponents,
    laplace_pair_information,
    leaderboard,
    live_win_rates,
    play,
    random_opponents,
)


def lower_index_wins(i, j):
    return 1.0 if i < j else 0.0


def test_round_robin_schedule():
    t = RoundRobin(8)
    pairs = t.next_round()
    assert len(pairs) == 28 and len({frozenset(p) for p in pairs}) == 28
    t.record(pairs, [lower_index_wins(i, j) for i, j in pairs])
    assert t.done and t.next_round() == [] and t.calls == 28 and t.rounds == 1


@pytest.mark.parametrize("n", [2, 3, 4, 8, 16])
def test_live_call_budget(n):
    t = play(LiveTournament(n), lower_index_wins)
    assert t.calls == (n * (n - 1) // 2 if n <= 3 else 1 + 2 + 3 * (n - 3))
    assert t.rounds == n - 1
    if n == 8:
        assert t.calls == 18  # App. B


def test_live_meets_best_worst_median_by_hand():
    # lower index always wins. After 0,1,2: board 0 (1.0), 1 (0.5), 2 (0.0); 3 meets all three and loses
    # all. Board: 0 (1.0), 1 (2/3), 2 (1/3), 3 (0.0): 4 meets best 0, worst 3 and median (lower middle) 1.
    t = LiveTournament(5)
    seen = []
    while pairs := t.next_round():
        seen.append(pairs)
        t.record(pairs, [lower_index_wins(i, j) for i, j in pairs])
    assert seen[0] == [(1, 0)]
    assert sorted(seen[1]) == [(2, 0), (2, 1)]
    assert sorted(seen[2]) == [(3, 0), (3, 1), (3, 2)]
    assert sorted(seen[3]) == [(4, 0), (4, 1), (4, 3)]


def test_live_follows_arrival_order_and_only_meets_arrived():
    order = [5, 2, 7, 0, 1, 6, 3, 4]
    t = LiveTournament(8, order=order, select=random_opponents(2), rng=np.random.default_rng(0))
    k = 1
    while pairs := t.next_round():
        new = order[k]
        assert all(i == new and j in order[:k] for i, j in pairs)
        t.record(pairs, [0.5] * len(pairs))
        k += 1
    with pytest.raises(ValueError, match="permutation"):
        LiveTournament(3, order=[0, 0, 1])


def test_invalid_matches_are_dropped_not_tied():
    def judge(i, j):
        return None if 7 in (i, j) else lower_index_wins(i, j)

    t = play(RoundRobin(8), judge)
    assert t.calls == 28 and len(t.invalid) == 7 and len(t.matches) == 21
    assert list(t.covered()) == [True] * 7 + [False]
    assert all(7 not in (i, j) for i, j, _ in t.matches)


def test_record_must_match_schedule():
    t = RoundRobin(3)
    t.next_round()
    with pytest.raises(ValueError, match="differ"):
        t.record([(0, 1)], [1.0])


def test_uncertainty_rounds_are_matchings_within_budget():
    rng = np.random.default_rng(5)
    beta = rng.normal(size=8)
    t = UncertaintyTournament(8, budget=13, rng=np.random.default_rng(1))
    seen = set()
    while pairs := t.next_round():
        items = [x for p in pairs for x in p]
        assert len(items) == len(set(items))  # each item at most once per round
        for i, j in pairs:
            assert frozenset((i, j)) not in seen  # never repeats a pair
            seen.add(frozenset((i, j)))
        t.record(pairs, [float(expit(beta[i] - beta[j])) for i, j in pairs])
    assert t.calls == 13
    assert t.covered().all()  # round 1 is a perfect matching


def test_uncertainty_beats_random_opponents_at_equal_cost():
    # a noisy judge from known strengths: the uncertainty schedule with 16 calls should rank better on
    # average than live random opponents with 18 calls (the simulation benchmark measures this at scale)
    from scipy.stats import kendalltau

    taus = {"unc": [], "rand": []}
    for seed in range(60):
        rng = np.random.default_rng(seed)
        beta = rng.normal(size=8) * 3
        noise = np.random.default_rng(seed + 99)

        def judge(i, j, r=noise, b=beta):
            return float(r.random() < expit(b[i] - b[j]))

        for name, t in (("unc", UncertaintyTournament(8, budget=16, rng=np.random.default_rng(seed))),
                        ("rand", LiveTournament(8, select=random_opponents(3), rng=np.random.default_rng(seed)))):
            done = play(t, judge)
            taus[name].append(kendalltau(opt_soft_pairwise(8, done.matches), beta)[0])
    assert np.mean(taus["unc"]) > np.mean(taus["rand"])


def test_anchor_opponents_with_few_arrivals():
    assert anchor_opponents(3, [0, 1, 2], [], np.random.default_rng(0)) == [0, 1, 2]


class FixedRng:
    """Stands in for the tournament's generator: a fixed permutation for round 1, ties broken by (i, j)."""

    def __init__(self, perm):
        self.perm = perm

    def permutation(self, n):
        return np.array(self.perm)

    def random(self):
        return 0.0


def schedule(t, judge=lambda i, j: 0.5):
    """Every round a tournament asks for until it is done, with ``judge``'s verdicts recorded."""
    rounds = []
    while pairs := t.next_round():
        rounds.append(pairs)
        t.record(pairs, [judge(i, j) for i, j in pairs])
    return rounds


def test_live_win_rates_by_hand():
    # 0: won 0.75 vs 1 and 1.0 as j of (2, 0, 0.0) -> 0.875; 1: 0.25 and 0.5 -> 0.375; 2 is not listed
    # (its matches count only for its opponents); 3 never played -> the default 0.5
    wr = live_win_rates([0, 1, 3], [(0, 1, 0.75), (1, 2, 0.5), (2, 0, 0.0)])
    assert wr == {0: 0.875, 1: 0.375, 3: 0.5}
    assert live_win_rates([4], [], default=0.0) == {4: 0.0}


def test_leaderboard_orders_by_win_rate_and_ties_by_arrival():
    # 1 beat 3; 2 and 0 drew: rates 1 -> 1.0, 2 -> 0.5, 0 -> 0.5, 3 -> 0.0; the tie 2/0 keeps arrival order
    assert leaderboard([3, 1, 2, 0], [(1, 3, 1.0), (2, 0, 0.5)]) == [1, 2, 0, 3]
    assert leaderboard([2, 0, 1], []) == [2, 0, 1]  # nobody played: arrival order, not item order


def test_anchor_median_is_the_lower_middle_of_the_board():
    # five arrived, higher index always wins: board 4, 3, 2, 1, 0 -> best 4, worst 0, median (5-1)//2 = 2 -> item 2
    arrived = [0, 1, 2, 3, 4]
    matches = [(j, i, 1.0) for i in arrived for j in arrived if i < j]
    assert anchor_opponents(5, arrived, matches, np.random.default_rng(0)) == [4, 0, 2]
    # six arrived, same results: board 5..0, median index (6-1)//2 = 2 -> item 3
    arrived6 = arrived + [5]
    matches6 = [(j, i, 1.0) for i in arrived6 for j in arrived6 if i < j]
    assert anchor_opponents(6, arrived6, matches6, np.random.default_rng(0)) == [5, 0, 3]


@pytest.mark.parametrize("arrived", [[0], [0, 1], [2, 0, 1]])
def test_anchor_opponents_below_four_arrivals_meets_each_once(arrived):
    new = 9
    opp = anchor_opponents(new, arrived, [], np.random.default_rng(0))
    assert opp == arrived and new not in opp


def test_random_opponents_distinct_and_rng_untouched_when_all_fit():
    pick = random_opponents()  # default k = 3
    for seed in range(20):
        got = pick(9, [4, 2, 7, 5], [], np.random.default_rng(seed))
        assert len(got) == 3 and len(set(got)) == 3 and set(got) <= {4, 2, 7, 5}
    # exactly k arrived: all of them, in arrival order, and the generator is not drawn from
    rng = np.random.default_rng(3)
    assert random_opponents(3)(9, [4, 2, 7], [], rng) == [4, 2, 7]
    assert rng.random() == np.random.default_rng(3).random()


def test_live_rng_default_is_seed_zero_and_a_given_rng_is_used():
    def live(**kw):
        return schedule(LiveTournament(6, select=random_opponents(2), **kw))

    assert live() == live(rng=np.random.default_rng(0)) == live()
    assert live(rng=np.random.default_rng(1)) != live(rng=np.random.default_rng(0))


def test_live_selector_sees_the_arrival_and_may_decline_it():
    seen = []

    def select(new, arrived, matches, rng):
        seen.append((new, list(arrived), list(matches)))
        return [] if new == 2 else list(arrived)

    t = LiveTournament(4, order=[1, 3, 2, 0], select=select)
    rounds = schedule(t, lower_index_wins)
    # 3 meets 1; 2's arrival is declined (no round of its own) but 2 has arrived: 0 meets 1, 3 and 2
    assert rounds == [[(3, 1)], [(0, 1), (0, 3), (0, 2)]]
    assert seen == [(3, [1], []), (2, [1, 3], [(3, 1, 0.0)]), (0, [1, 3, 2], [(3, 1, 0.0)])]
    assert t.done and t.rounds == 2 and t.calls == 4


def test_round_robin_of_one_item_is_done_and_not_done_before_playing():
    assert RoundRobin(1).done is True and RoundRobin(1).next_round() == []
    assert RoundRobin(3).done is False


def test_record_reasons_and_failed_verdicts():
    t = RoundRobin(3)
    pairs = t.next_round()
    assert pairs == [(0, 1), (0, 2), (1, 2)]
    t.record(pairs, [None, float("nan"), 0.25], reasons=["judge timed out", None, None])
    # a None or NaN verdict is dropped with its reason (a default one when none was given), never a tie
    assert t.invalid == [(0, 1, "judge timed out"), (0, 2, "invalid judge output")]
    assert t.matches == [(1, 2, 0.25)] and t.calls == 3
    assert list(np.flatnonzero(~t.covered())) == [0]  # covered() is a boolean mask


def test_play_with_a_judge_that_fails_records_invalid():
    t = play(LiveTournament(3), lambda i, j: None if (i, j) == (2, 0) else lower_index_wins(i, j))
    assert t.matches == [(1, 0, 0.0), (2, 1, 0.0)]
    assert t.invalid == [(2, 0, "invalid judge output")]
    assert t.calls == 3 and t.rounds == 2


@pytest.mark.parametrize("bad", [1.5, -0.25])
def test_record_refuses_an_outcome_outside_unit_interval(bad):
    t = RoundRobin(2)
    with pytest.raises(ValueError, match=r"outcome .* for pair \(0, 1\) is outside \[0, 1\]"):
        t.record(t.next_round(), [bad])


def test_record_protocol_errors():
    t = RoundRobin(3)
    with pytest.raises(ValueError, match="differ"):
        t.record([(0, 1)], [1.0])  # nothing scheduled yet
    pairs = t.next_round()
    with pytest.raises(RuntimeError, match="record"):
        t.next_round()
    with pytest.raises(ValueError):
        t.record(pairs, [1.0, 0.0])  # one verdict short
    t = RoundRobin(2)
    pairs = t.next_round()
    t.record(pairs, [1.0])
    with pytest.raises(ValueError, match="differ"):
        t.record(pairs, [1.0])  # the same round twice


def test_laplace_information_two_items_by_hand():
    # beta = +-ln3/2: p = sigma(ln 3) = 3/4, w = 2 p (1-p) = 3/8. H = [[1+w, -w], [-w, 1+w]] (l2 = 1),
    # Var(b0 - b1) = 2 / (1 + 2w) = 8/7, information p(1-p) Var = 3/16 * 8/7 = 3/14; 0 on the diagonal
    beta = np.array([math.log(3) / 2, -math.log(3) / 2])
    info = laplace_pair_information(beta, [(0, 1, 1.0)], l2=1.0)
    np.testing.assert_allclose(info, [[0.0, 3 / 14], [3 / 14, 0.0]], atol=1e-12)


def test_laplace_information_three_item_chain_by_hand():
    # beta = 0, matches 0-1 and 1-2, l2 = 1: w = 1/2, H = [[1.5, -.5, 0], [-.5, 2, -.5], [0, -.5, 1.5]],
    # det 3.75, S00 = S22 = 11/15, S11 = 9/15, S01 = S12 = 3/15, S02 = 1/15.
    # Var(0-1) = 14/15, Var(0-2) = 20/15: the unplayed pair carries the most information (1/4 * Var).
    info = laplace_pair_information(np.zeros(3), [(0, 1, 1.0), (1, 2, 0.5)], l2=1.0)
    np.testing.assert_allclose(info, [[0, 7 / 30, 1 / 3], [7 / 30, 0, 7 / 30], [1 / 3, 7 / 30, 0]], atol=1e-12)


def test_laplace_order_criterion_two_items_by_hand():
    # l2 = 4: Var(b0 - b1) = 2 / (4 + 2w) = 8/19; chance the pair is misordered Phi(-ln 3 / sqrt(8/19)) ~ 0.0452
    beta = np.array([math.log(3) / 2, -math.log(3) / 2])
    got = laplace_pair_information(beta, [(0, 1, 1.0)], l2=4.0, criterion="order")
    off = norm.cdf(-math.log(3) / math.sqrt(8 / 19))
    assert 0.045 < off < 0.046
    np.testing.assert_allclose(got, [[0.5, off], [off, 0.5]], atol=1e-12)  # |b_i - b_i| = 0: a coin flip


def test_pair_criterion_must_be_known():
    with pytest.raises(ValueError, match=r"pair criterion must be one of \('information', 'order'\), got 'oder'"):
        laplace_pair_information(np.zeros(2), [], 1.0, criterion="oder")
    with pytest.raises(ValueError, match="pair criterion"):
        UncertaintyTournament(4, criterion="Information")


def test_uncertainty_needs_a_prior():
    with pytest.raises(ValueError, match=r"l2 must be > 0 .* got 0.0"):
        UncertaintyTournament(4, l2=0.0)


def test_uncertainty_round_one_is_consecutive_pairs_of_the_permutation():
    assert UncertaintyTournament(4, rng=FixedRng([3, 1, 0, 2])).next_round() == [(3, 1), (0, 2)]
    assert UncertaintyTournament(5, rng=FixedRng([4, 0, 3, 1, 2])).next_round() == [(4, 0), (3, 1)]  # 2 sits out


@pytest.mark.parametrize("seed", range(10))
def test_uncertainty_plays_every_pair_of_four_once_in_three_matchings(seed):
    # K4's six pairs split into three perfect matchings; after round 1 the four left form a 4-cycle, so
    # each later round is again two disjoint pairs, and the schedule ends when all six are played
    t = UncertaintyTournament(4, budget=100, rng=np.random.default_rng(seed))
    rounds = schedule(t, lower_index_wins)
    assert [len(r) for r in rounds] == [2, 2, 2]
    assert all(len({x for p in r for x in p}) == 4 for r in rounds)
    assert sorted(tuple(sorted(p)) for r in rounds for p in r) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    assert t.done and t.calls == 6


def test_uncertainty_goes_on_when_every_verdict_fails():
    t = UncertaintyTournament(4, budget=6)
    schedule(t, lambda i, j: None)
    assert t.calls == 6 and len(t.invalid) == 6 and t.matches == [] and not t.covered().any()


def test_uncertainty_default_budget_is_two_calls_per_item():
    assert play(UncertaintyTournament(8), lower_index_wins).calls == 16
    assert play(UncertaintyTournament(3, budget=2), lower_index_wins).calls == 2


def test_uncertainty_rng_default_is_seed_zero_and_a_given_rng_is_used():
    def unc(**kw):
        return schedule(UncertaintyTournament(6, **kw), lower_index_wins)

    assert unc() == unc(rng=np.random.default_rng(0)) == unc()
    assert unc(rng=np.random.default_rng(1)) != unc(rng=np.random.default_rng(0))


def _two_block_round_two(l2, criterion="information"):
    """Round 2 of five items after 0 beat 1 and 2 beat 3, both with o = 0.9; item 4 sat out round 1."""
    t = UncertaintyTournament(5, budget=4, l2=l2, rng=FixedRng([0, 1, 2, 3, 4]), criterion=criterion)
    assert t.next_round() == [(0, 1), (2, 3)]
    t.record([(0, 1), (2, 3)], [0.9, 0.9])
    return t.next_round()


def test_uncertainty_round_two_by_hand_uses_its_l2():
    # eq. 10 (mirrored) for one match with o = 0.9: b0 = b2 = x, b1 = b3 = -x with l2 x = 2 (0.9 - sigma(2x));
    # b4 = 0. Each block's 2x2 posterior gives S00 = (l2 + w) / (l2 (l2 + 2w)), w = 2 sigma(2x) sigma(-2x);
    # S44 = 1/l2. Pair (0, 2) (equal strengths): 1/4 * 2 S00; pair (k, 4): sigma(x) sigma(-x) (S00 + 1/l2).
    def infos(l2):
        x = brentq(lambda x: l2 * x - 2 * (0.9 - expit(2 * x)), 0, 5)
        w = 2 * expit(2 * x) * expit(-2 * x)
        s00 = (l2 + w) / (l2 * (l2 + 2 * w))
        return 0.25 * 2 * s00, expit(x) * expit(-x) * (s00 + 1 / l2)

    equal, with4 = infos(10.0)  # x ~ 0.073; ~0.0477 < ~0.0488: item 4, the least measured, plays first
    assert with4 > equal
    assert 4 in {x for p in _two_block_round_two(10.0) for x in p}
    # (a fit at l2 = 1 would put x ~ 0.41 and, with this posterior, rank the equal pairs (0, 2), (1, 3) first)


def test_uncertainty_order_criterion_picks_equal_strength_pairs():
    # under "order" a pair of equal estimates has the largest misorder chance Phi(0) = 1/2: (0, 2) and (1, 3)
    # are chosen even at l2 = 10, where the information criterion lets item 4 play (test above)
    assert sorted(_two_block_round_two(10.0, criterion="order")) == [(0, 2), (1, 3)]
