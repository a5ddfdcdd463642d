"""Bradley-Terry with soft outcomes (Reasoning Arena eq. 7-10), win-rate (eq. 8), normalisation."""

import itertools

import numpy as np
import pytest
from scipy.optimize import check_grad
from scipy.special import expit, logit

from rewardkit.arena.ranking import (
    NoMLEError,
    _loss_grad,
    bradley_terry,
    bt_log_likelihood,
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
        b = bradley_terry(2, [(0, 1, o)], l2=0.0)
        assert b[0] - b[1] == pytest.approx(logit(o), abs=1e-6)
        assert b.sum() == pytest.approx(0.0, abs=1e-9)  # centred


def test_mle_recovers_generating_strengths():
    beta = np.array([1.5, -0.3, 0.0, 0.8, -2.0, 0.4])
    fit = bradley_terry(6, round_robin_expected(beta), l2=0.0)
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
    norms = [np.linalg.norm(bradley_terry(3, m, l2=l2)) for l2 in (0.0, 0.1, 1.0, 10.0)]
    assert np.all(np.diff(norms) < 0)
    np.testing.assert_allclose(bradley_terry(3, [(0, 1, 0.5), (1, 2, 0.5), (2, 0, 0.5)]), 0.0, atol=1e-8)


def test_mirror_equals_doubling_data_weight():
    # eq. 10's mirrored match repeats the same cross-entropy term: mirror with l2 == no mirror with l2/2
    rng = np.random.default_rng(2)
    arr = random_matches(rng, 5, 9)
    np.testing.assert_allclose(bradley_terry(5, arr, l2=1.0, mirror=True),
                               bradley_terry(5, arr, l2=0.5, mirror=False), atol=1e-6)


def test_presentation_order_does_not_matter_and_items_are_exchangeable():
    rng = np.random.default_rng(3)
    arr = random_matches(rng, 6, 12)
    flipped = np.stack([arr[:, 1], arr[:, 0], 1 - arr[:, 2]], 1)
    np.testing.assert_allclose(bradley_terry(6, arr), bradley_terry(6, flipped), atol=1e-7)
    perm = rng.permutation(6)
    relabelled = arr.copy()
    relabelled[:, 0], relabelled[:, 1] = perm[arr[:, 0].astype(int)], perm[arr[:, 1].astype(int)]
    np.testing.assert_allclose(bradley_terry(6, relabelled)[perm], bradley_terry(6, arr), atol=1e-7)


def test_mle_nonexistence_is_named():
    only_wins = [(0, 1, 1.0), (0, 2, 1.0), (1, 2, 0.5)]
    assert "only win" in mle_problem(3, only_wins)
    with pytest.raises(NoMLEError, match="only win"):
        bradley_terry(3, only_wins, l2=0.0)
    disconnected = [(0, 1, 0.7), (2, 3, 0.4)]
    with pytest.raises(NoMLEError, match="disconnected"):
        bradley_terry(4, disconnected, l2=0.0)
    with pytest.raises(NoMLEError, match="no match"):
        bradley_terry(3, [(0, 1, 0.6)], l2=0.0)
    # {0,1} beat {2,3} in every cross match: connected but not strongly connected
    dominated = [(0, 1, 0.5), (2, 3, 0.5), (0, 2, 1.0), (1, 3, 1.0)]
    assert "strongly connected" in mle_problem(4, dominated)
    # with a ridge every case has a finite answer, ordered as the data say
    b = bradley_terry(3, only_wins, l2=1.0)
    assert np.all(np.isfinite(b)) and b[0] > b[1] and b[0] > b[2]
    assert mle_problem(3, [(0, 1, 0.7), (1, 2, 0.6), (0, 2, 0.8)]) is None


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        bradley_terry(2, [(0, 1, 1.2)])
    with pytest.raises(ValueError, match="out of range"):
        bradley_terry(3, [(0, 5, 0.5)])
    with pytest.raises(ValueError, match="itself"):
        bradley_terry(3, [(1, 1, 0.5)])
    with pytest.raises(ValueError, match="NaN"):
        bradley_terry(2, [(0, 1, float("nan"))])


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


def test_bt_log_likelihood_is_the_log_probability_of_the_outcomes():
    # one match, item 0 beat item 1 (o = 1), beta = (1, 0): P = sigma(1) = 1 / (1 + e^-1), log P = -0.3133
    assert bt_log_likelihood(np.array([1.0, 0.0]), [(0, 1, 1.0)]) == pytest.approx(-np.log1p(np.exp(-1.0)))
    # a soft outcome o = 0.25 at equal strengths: 0.25 log 1/2 + 0.75 log 1/2 = -log 2
    assert bt_log_likelihood(np.zeros(2), [(0, 1, 0.25)]) == pytest.approx(-np.log(2))
    # a log-likelihood is <= 0, and the strengths that generated the data fit them better than wrong ones
    data = round_robin_expected([1.0, 0.0, -1.0])
    good, reversed_ = bt_log_likelihood(np.array([1.0, 0.0, -1.0]), data), bt_log_likelihood(np.array([-1.0, 0.0, 1.0]), data)
    assert reversed_ < good < 0


def test_cyclic_triads_use_each_pairs_mean_outcome():
    # 0 beats 1 on the mean of three matches (2 of 3, the last one lost), 1 beats 2, 2 beats 0: a cycle;
    # 3 beats everyone, so the three triads with 3 are transitive: 1 cyclic triad of 4 decided ones
    data = [(0, 1, 1.0), (0, 1, 1.0), (0, 1, 0.0), (1, 2, 1.0), (2, 0, 1.0), (3, 0, 1.0), (3, 1, 1.0), (3, 2, 1.0)]
    assert cyclic_triad_fraction(4, data) == 0.25
    assert cyclic_triad_fraction(4, [(b, a, 1 - o) for a, b, o in data]) == 0.25  # the same matches, mirrored
    with pytest.raises(ValueError):
        cyclic_triad_fraction(3, data)  # item 3 does not exist among 3 items


def test_bt_log_likelihood_refuses_items_beyond_its_strengths():
    with pytest.raises(ValueError):
        bt_log_likelihood(np.zeros(2), [(0, 2, 1.0)])
