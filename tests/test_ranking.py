"""Bradley-Terry with soft outcomes (Reasoning Arena eq. 7-10), win-rate (eq. 8), normalisation."""

import itertools

import numpy as np
import pytest
from scipy.optimize import check_grad
from scipy.special import expit, logit

from rewardkit.ranking import (
    NoMLEError,
    _loss_grad,
    bradley_terry,
    cyclic_triad_fraction,
    minmax_normalize,
    mle_problem,
    newton_soft_pairwise_batched,
    opt_soft_pairwise,
    win_rate_pairwise,
)


def round_robin_expected(beta):
    """All pairs with the *expected* soft outcome sigma(b_i - b_j): the MLE must give beta back."""
    return [(i, j, float(expit(beta[i] - beta[j]))) for i, j in itertools.combinations(range(len(beta)), 2)]


def random_matches(rng, n, m):
    return np.array([(*rng.choice(n, 2, replace=False), rng.random()) for _ in range(m)], dtype=float)


def test_two_items_closed_form():
    # one match with outcome o: the MLE satisfies sigma(b0 - b1) = o, i.e. b0 - b1 = logit(o)
    for o in (0.2, 0.6, 0.9):
        b = bradley_terry([(0, 1, o)], 2, l2=0.0)
        assert b[0] - b[1] == pytest.approx(logit(o), abs=1e-6)
        assert b.sum() == pytest.approx(0.0, abs=1e-9)  # centred


def test_mle_recovers_generating_strengths():
    beta = np.array([1.5, -0.3, 0.0, 0.8, -2.0, 0.4])
    fit = bradley_terry(round_robin_expected(beta), 6, l2=0.0)
    np.testing.assert_allclose(fit, beta - beta.mean(), atol=1e-5)


def test_gradient_is_analytic_derivative():
    rng = np.random.default_rng(1)
    arr = random_matches(rng, 6, 15)
    i, j, o = arr[:, 0].astype(int), arr[:, 1].astype(int), arr[:, 2]
    for _ in range(3):
        x = rng.normal(size=6)
        err = check_grad(lambda b: _loss_grad(b, i, j, o, 0.7)[0], lambda b: _loss_grad(b, i, j, o, 0.7)[1], x)
        assert err < 1e-5


def test_l2_shrinks_and_ties_give_zero():
    beta = np.array([2.0, 0.0, -2.0])
    m = round_robin_expected(beta)
    norms = [np.linalg.norm(bradley_terry(m, 3, l2=l2)) for l2 in (0.0, 0.1, 1.0, 10.0)]
    assert np.all(np.diff(norms) < 0)
    np.testing.assert_allclose(bradley_terry([(0, 1, 0.5), (1, 2, 0.5), (2, 0, 0.5)], 3), 0.0, atol=1e-8)


def test_mirror_equals_doubling_data_weight():
    # eq. 10's mirrored match repeats the same cross-entropy term: mirror with l2 == no mirror with l2/2
    rng = np.random.default_rng(2)
    arr = random_matches(rng, 5, 9)
    np.testing.assert_allclose(bradley_terry(arr, 5, l2=1.0, mirror=True),
                               bradley_terry(arr, 5, l2=0.5, mirror=False), atol=1e-6)


def test_presentation_order_does_not_matter_and_items_are_exchangeable():
    rng = np.random.default_rng(3)
    arr = random_matches(rng, 6, 12)
    flipped = np.stack([arr[:, 1], arr[:, 0], 1 - arr[:, 2]], 1)
    np.testing.assert_allclose(bradley_terry(arr, 6), bradley_terry(flipped, 6), atol=1e-7)
    perm = rng.permutation(6)
    relabelled = arr.copy()
    relabelled[:, 0], relabelled[:, 1] = perm[arr[:, 0].astype(int)], perm[arr[:, 1].astype(int)]
    np.testing.assert_allclose(bradley_terry(relabelled, 6)[perm], bradley_terry(arr, 6), atol=1e-7)


def test_mle_nonexistence_is_named():
    only_wins = [(0, 1, 1.0), (0, 2, 1.0), (1, 2, 0.5)]
    assert "only win" in mle_problem(3, only_wins)
    with pytest.raises(NoMLEError, match="only win"):
        bradley_terry(only_wins, 3, l2=0.0)
    disconnected = [(0, 1, 0.7), (2, 3, 0.4)]
    with pytest.raises(NoMLEError, match="disconnected"):
        bradley_terry(disconnected, 4, l2=0.0)
    with pytest.raises(NoMLEError, match="no match"):
        bradley_terry([(0, 1, 0.6)], 3, l2=0.0)
    # {0,1} beat {2,3} in every cross match: connected but not strongly connected
    dominated = [(0, 1, 0.5), (2, 3, 0.5), (0, 2, 1.0), (1, 3, 1.0)]
    assert "strongly connected" in mle_problem(4, dominated)
    # with a ridge every case has a finite answer, ordered as the data say
    b = bradley_terry(only_wins, 3, l2=1.0)
    assert np.all(np.isfinite(b)) and b[0] > b[1] and b[0] > b[2]
    assert mle_problem(3, [(0, 1, 0.7), (1, 2, 0.6), (0, 2, 0.8)]) is None


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        bradley_terry([(0, 1, 1.2)], 2)
    with pytest.raises(ValueError, match="out of range"):
        bradley_terry([(0, 5, 0.5)], 3)
    with pytest.raises(ValueError, match="itself"):
        bradley_terry([(1, 1, 0.5)], 3)
    with pytest.raises(ValueError, match="NaN"):
        bradley_terry([(0, 1, float("nan"))], 2)


def test_batched_reaches_scipy_optimum_with_padding():
    rng = np.random.default_rng(4)
    n, groups = 8, 40
    sizes = rng.integers(0, 28, size=groups)
    data = np.zeros((groups, 28, 3))
    mask = np.zeros((groups, 28), bool)
    for g, m in enumerate(sizes):
        data[g, :m] = random_matches(rng, n, m)
        data[g, m:] = (0, 0, 7.0)  # garbage padding must be ignored
        mask[g, :m] = True
    for l2, mirror in ((1.0, True), (0.3, False)):
        batched = newton_soft_pairwise_batched(n, data, mask, l2=l2, mirror=mirror)
        for g, m in enumerate(sizes):
            ref = opt_soft_pairwise(n, data[g, :m], l2=l2, mirror=mirror)
            np.testing.assert_allclose(batched[g], ref, atol=1e-6)
    with pytest.raises(ValueError, match="l2 > 0"):
        newton_soft_pairwise_batched(n, data, mask, l2=0.0)


def test_batched_handles_near_deterministic_outcomes():
    # hard 0/1 outcomes make undamped Newton overshoot; the backtracked steps must still converge
    data = np.array([[(0, 1, 1.0), (1, 2, 1.0), (0, 2, 1.0), (2, 3, 1.0)]])
    np.testing.assert_allclose(newton_soft_pairwise_batched(4, data, l2=0.01)[0],
                               opt_soft_pairwise(4, data[0], l2=0.01), atol=1e-5)


def test_minmax_normalize():
    out = minmax_normalize(np.array([-1.0, 3.0, 1.0, np.nan]))
    np.testing.assert_allclose(out[:3], [0.0, 1.0, 0.5])
    assert np.isnan(out[3])
    np.testing.assert_allclose(minmax_normalize(np.array([0.2, 0.2, 0.2])), 0.5)
    np.testing.assert_allclose(minmax_normalize(np.array([4.0])), 0.5)
    assert np.all(np.isnan(minmax_normalize(np.array([np.nan, np.nan]))))


def test_win_rate_round_robin():
    # item k beats every lower-indexed item: win rate k / (N - 1); eq. 8 sums to N/2 over a round robin
    n = 5
    matches = [(j, i, 1.0) for i, j in itertools.combinations(range(n), 2)]
    wr = win_rate_pairwise(n, matches, normalize="n-1")
    np.testing.assert_allclose(wr, np.arange(n) / (n - 1))
    soft = [(i, j, 0.3) for i, j in itertools.combinations(range(n), 2)]
    assert win_rate_pairwise(n, soft, normalize="n-1").sum() == pytest.approx(n / 2)
    played = win_rate_pairwise(4, [(0, 1, 1.0), (0, 2, 0.5)])
    np.testing.assert_allclose(played[:3], [0.75, 0.0, 0.5])
    assert np.isnan(played[3])


def test_cyclic_triads():
    assert cyclic_triad_fraction(3, [(0, 1, 1.0), (1, 2, 1.0), (2, 0, 1.0)]) == 1.0
    assert cyclic_triad_fraction(4, [(i, j, 0.9) for i, j in itertools.combinations(range(4), 2)]) == 0.0
    assert np.isnan(cyclic_triad_fraction(3, [(0, 1, 1.0)]))


# ------------------------------------------------------------------------------------ tournaments

from rewardkit.ranking import (  # noqa: E402
    LiveTournament,
    RoundRobin,
    UncertaintyTournament,
    anchor_opponents,
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
