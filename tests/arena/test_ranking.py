"""Bradley-Terry with soft outcomes (Reasoning Arena eq. 7-10), win-rate (eq. 8), normalisation."""

import itertools
import warnings

import numpy as np
import pytest
from scipy.optimize import brentq, check_grad
from scipy.special import expit, logit

from rewardkit.arena.ranking import (
    NoMLEError,
    NotConvergedError,
    _loss_grad,
    as_matches,
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


def score_gradient(beta, arr, l2, mirror):
    """Eq. 10's gradient as score equations: each item's observed minus expected soft wins (x2 with the mirror)
    minus l2 * beta; zero at the optimum."""
    resid = np.zeros(len(beta))
    for a, b, o in arr:
        p = 1.0 / (1.0 + np.exp(-(beta[int(a)] - beta[int(b)])))
        resid[int(a)] += o - p
        resid[int(b)] -= o - p
    return resid * (2.0 if mirror else 1.0) - l2 * beta


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
    # hard 0/1 outcomes with a small ridge: the strengths run far out, and the fit must still reach scipy's optimum
    # (this case needs no backtracking; test_batched_newton_backtracks_a_step_that_raises_the_loss has one that does)
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


def _two_item_ridge_optimum(o, l2, mirror):
    """Eq. 10 for one match (0, 1, o), solved by hand: the gradient vanishes where b1 = -b0 and
    l2 * b0 = k (o - sigma(2 b0)), k = 2 with the mirror (two equal terms) and 1 without; brentq finds b0."""
    k = 2.0 if mirror else 1.0
    b0 = brentq(lambda b: l2 * b - k * (o - expit(2 * b)), -10, 10, xtol=1e-14)
    return np.array([b0, -b0])


def test_defaults_are_eq10_with_unit_ridge_and_the_mirror():
    # bradley_terry / opt_soft_pairwise / the batched fitter default to l2 = 1 with eq. 10's mirrored matches
    for o in (0.9, 0.25):
        want = _two_item_ridge_optimum(o, 1.0, mirror=True)
        np.testing.assert_allclose(bradley_terry(2, [(0, 1, o)]), want, atol=1e-7)
        np.testing.assert_allclose(opt_soft_pairwise(2, [(0, 1, o)]), want, atol=1e-7)
        np.testing.assert_allclose(newton_soft_pairwise_batched(2, np.array([[(0, 1, o)]]))[0], want, atol=1e-9)
        np.testing.assert_allclose(newton_soft_pairwise_batched(2, np.array([[(0, 1, o)]]), l2=0.5, mirror=False)[0],
                                   _two_item_ridge_optimum(o, 0.5, mirror=False), atol=1e-9)


def test_fit_satisfies_the_score_equations_and_warns_nothing():
    # at the optimum of eq. 10 each item's observed soft wins minus its expected wins equal l2 * beta / k (the
    # gradient is zero); a fit of valid matches raises no warning (e.g. no unknown optimiser option)
    rng = np.random.default_rng(7)
    arr = random_matches(rng, 5, 14)
    for l2, mirror in ((1.0, True), (0.2, False)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fits = [opt_soft_pairwise(5, arr, l2=l2, mirror=mirror),
                    newton_soft_pairwise_batched(5, arr[None], l2=l2, mirror=mirror)[0]]
        for beta in fits:
            assert np.abs(score_gradient(beta, arr, l2, mirror)).max() < 1e-7


def test_no_matches_give_zero_strengths():
    np.testing.assert_array_equal(bradley_terry(3, []), np.zeros(3))
    assert as_matches([]).shape == (0, 3)
    # one item, nothing to compare: strength 0 in the batched fitter too (padding only)
    np.testing.assert_array_equal(newton_soft_pairwise_batched(1, np.zeros((2, 3, 3)), np.zeros((2, 3), bool)),
                                  np.zeros((2, 1)))


def test_as_matches_returns_floats_and_rejects_malformed_rows():
    arr = as_matches([(0, 1, 1), (2, 0, 0)])
    assert arr.dtype == np.float64
    for bad in ([(0, 1)], [0, 1, 0.5], [(0, 1, 0.5, 1)]):
        with pytest.raises(ValueError, match="shape"):
            as_matches(bad)
    for bad in ([(0.5, 1, 0.5)], [(-1, 1, 0.5)], [(0, -2, 0.5)]):
        with pytest.raises(ValueError, match="non-negative integers"):
            as_matches(bad)


def test_every_entry_point_checks_item_range():
    for f in (mle_problem, win_rate_pairwise):
        with pytest.raises(ValueError, match="out of range"):
            f(2, [(0, 3, 1.0)])


def test_mle_problem_small_cases():
    assert mle_problem(1, []) is None  # a single item: nothing to estimate
    # two items, one decisive match: 0 only wins, 1 only loses (both strengths diverge)
    assert mle_problem(2, [(0, 1, 1.0)]) == ("items [0] only win (strength -> +inf); "
                                             "items [1] only lose (strength -> -inf)")
    # item 2 loses every match it plays, as the second item of the pair
    assert mle_problem(3, [(0, 2, 1.0), (1, 2, 1.0), (0, 1, 0.5)]) == "items [2] only lose (strength -> -inf)"
    assert mle_problem(3, [(0, 1, 0.6)]) == "items [2] have no match"
    # {0,1} beat {2,3}, written with the losers first and o = 0: the win edges point 0 -> 2 and 1 -> 3 only
    losers_first = [(0, 1, 0.5), (2, 3, 0.5), (2, 0, 0.0), (3, 1, 0.0)]
    assert mle_problem(4, losers_first) == ("a subset of items beats every item outside it "
                                            "(win graph not strongly connected): strengths diverge")
    assert mle_problem(4, losers_first + [(2, 1, 0.1)]) is None


def test_batched_rejects_bad_matches_and_accepts_hard_outcomes():
    ok = np.array([[(0, 1, 0.0), (1, 2, 1.0), (2, 0, 0.0)]])
    np.testing.assert_allclose(newton_soft_pairwise_batched(3, ok, l2=0.5)[0], opt_soft_pairwise(3, ok[0], l2=0.5),
                               atol=1e-6)
    for row in ((0, 0, 0.5), (0, 3, 0.5), (3, 0, 0.5), (-1, 0, 0.5), (0, -1, 0.5)):
        with pytest.raises(ValueError, match="out-of-range or self-paired"):
            newton_soft_pairwise_batched(3, np.array([[(0, 1, 0.5), row]]))
    for o in (-0.1, 1.5, np.nan):
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            newton_soft_pairwise_batched(3, np.array([[(0, 1, 0.5), (1, 2, o)]]))
    for shape in ((1, 2, 2), (2, 3), (1, 2, 4)):
        with pytest.raises(ValueError, match="shape"):
            newton_soft_pairwise_batched(3, np.zeros(shape))


def test_batched_mask_may_be_any_zero_one_array():
    rng = np.random.default_rng(8)
    data = random_matches(rng, 4, 6)[None]
    mask = np.array([[1.0, 1.0, 1.0, 1.0, 0.0, 0.0]])
    np.testing.assert_allclose(newton_soft_pairwise_batched(4, data, mask),
                               newton_soft_pairwise_batched(4, data, mask.astype(bool)), atol=0)
    np.testing.assert_allclose(newton_soft_pairwise_batched(4, data, mask)[0], opt_soft_pairwise(4, data[0, :4]),
                               atol=1e-6)


def test_minmax_normalize_float_noise_is_a_tie_and_ints_are_scaled():
    np.testing.assert_allclose(minmax_normalize([1, 3, 2]), [0.0, 1.0, 0.5])
    np.testing.assert_allclose(minmax_normalize(np.array([1, 3, 2])), [0.0, 1.0, 0.5])
    np.testing.assert_allclose(minmax_normalize(np.array([0.0, 0.5])), [0.0, 1.0])  # a real gap is ranked
    np.testing.assert_allclose(minmax_normalize(np.array([0.0, 1e-13])), [0.5, 0.5])  # rounding noise near 0
    np.testing.assert_allclose(minmax_normalize(np.array([1e6, 1e6 + 1e-7])), [0.5, 0.5])  # ... and at scale


def test_win_rate_of_two_items_over_n_minus_1():
    np.testing.assert_allclose(win_rate_pairwise(2, [(0, 1, 1.0)], normalize="n-1"), [1.0, 0.0])
    np.testing.assert_allclose(win_rate_pairwise(2, [(0, 1, 0.3)], normalize="n-1"), [0.3, 0.7])


def test_cyclic_triads_skip_undecided_pairs_wherever_they_are():
    # a tie or an unplayed pair leaves the triad undecided, whichever of its three pairs it is
    assert np.isnan(cyclic_triad_fraction(3, [(0, 1, 1.0), (2, 0, 1.0), (1, 2, 0.5)]))
    assert np.isnan(cyclic_triad_fraction(3, [(0, 1, 0.5), (1, 2, 1.0), (2, 0, 1.0)]))
    assert np.isnan(cyclic_triad_fraction(3, [(0, 1, 1.0), (1, 2, 1.0)]))
    # 0>1>3>0 is a cycle; 2>0, 2>3, 3>0 is transitive; the triads holding the tie (1, 2) are undecided: 1 of 2
    data = [(0, 1, 1.0), (1, 3, 1.0), (3, 0, 1.0), (2, 0, 1.0), (2, 3, 1.0), (1, 2, 0.5)]
    assert cyclic_triad_fraction(4, data) == 0.5


def test_bt_log_likelihood_is_double_precision_for_float32_strengths():
    # strengths from a float32 tensor: log sigma(1) = -log(1 + e^-1) to double precision, not float32's 1e-7
    assert bt_log_likelihood(np.array([1.0, 0.0], np.float32), [(0, 1, 1.0)]) == pytest.approx(
        -np.log1p(np.exp(-1.0)), rel=1e-13)


def test_batched_stops_only_below_its_gradient_tolerance():
    # the docstring's stopping rule: every group's max |gradient of eq. 10| < tol (1e-10) on return; the gradient is
    # written as the score equations (observed minus expected soft wins of each item, times the mirror's 2, minus
    # l2 * beta). Many matches make the loss large, where a relative acceptance test that is too strict stalls.
    rng = np.random.default_rng(7)
    for n, m in ((5, 14), (8, 400)):
        arr = random_matches(rng, n, m)
        for l2, mirror in ((1.0, True), (0.2, False), (1e-3, True)):
            beta = newton_soft_pairwise_batched(n, arr[None], l2=l2, mirror=mirror)[0]
            assert np.abs(score_gradient(beta, arr, l2, mirror)).max() < 1e-10
    # on the boundary: a single match with o = 0.75 has gradient 2 (0.75 - sigma(0)) = 0.5 exactly at the start, so
    # with tol = 0.5 the fit has not yet stopped there: it must step on until the gradient is below 0.5
    one = np.array([(0, 1, 0.75)])
    beta = newton_soft_pairwise_batched(2, one[None], tol=0.5)[0]
    assert np.abs(score_gradient(beta, one, 1.0, mirror=True)).max() < 0.5


# Every match a hard win of the lower-numbered item: the win graph is acyclic, so the MLE does not exist and only a
# tiny ridge holds the strengths; they spread to |beta| ~ 40, where the sigmoids saturate and Newton's quadratic model
# is far off: the full Newton step from the 16th iterate raises eq. 10's loss by ~80%, and the fit must backtrack it.
SATURATING = np.array([(a, b, 1.0) for a, b in ((4, 7), (4, 7), (2, 7), (2, 4), (2, 6), (2, 5), (2, 5), (0, 7),
                                                (0, 2), (6, 7), (3, 5), (5, 6), (1, 3))])
L2_TINY = 1e-8


def eq10_loss(beta, arr, l2, mirror=True):
    """Eq. 10 written out match by match: -[o log s(d) + (1 - o) log s(-d)] (twice with the mirror) + l2/2 ||beta||^2."""
    # -log s(d) = log(1 + e^-d), written so that saturated matches (|d| ~ 40) keep their tiny terms
    ce = sum(o * np.logaddexp(0.0, beta[int(b)] - beta[int(a)]) + (1 - o) * np.logaddexp(0.0, beta[int(a)] - beta[int(b)])
             for a, b, o in arr)
    return (2.0 if mirror else 1.0) * ce + 0.5 * l2 * float(beta @ beta)


def full_newton_step(beta, arr, l2):
    """beta minus H^-1 grad of eq. 10 (mirrored), H = sum 2 s(1-s) (e_a - e_b)(e_a - e_b)^T + l2 I: the undamped step."""
    H = l2 * np.eye(len(beta))
    for a, b, _ in arr:
        e = np.zeros(len(beta))
        e[int(a)], e[int(b)] = 1.0, -1.0
        s = expit(beta[int(a)] - beta[int(b)])
        H += 2 * s * (1 - s) * np.outer(e, e)
    return beta + np.linalg.solve(H, score_gradient(beta, arr, l2, mirror=True))


def test_batched_newton_backtracks_a_step_that_raises_the_loss():
    # the docstring's promise: each Newton step is backtracked until the loss decreases. The iterate after k steps is
    # the fit with max_iter=k; its loss (eq. 10 written out here) must never go up, and the fit must still converge.
    fits = [newton_soft_pairwise_batched(8, SATURATING[None], l2=L2_TINY, max_iter=k)[0] for k in range(26)]
    losses = [eq10_loss(b, SATURATING, L2_TINY) for b in fits]
    assert eq10_loss(full_newton_step(fits[16], SATURATING, L2_TINY), SATURATING, L2_TINY) > 1.5 * losses[16]
    for k in range(25):
        assert losses[k + 1] <= losses[k] * (1 + 1e-12), f"step {k + 1} raised the loss"
    assert np.abs(score_gradient(fits[-1], SATURATING, L2_TINY, mirror=True)).max() < 1e-10


def test_batched_groups_backtrack_independently():
    # three groups in one batch, padded to 13 matches: the saturating one (backtracks at step 17), a hard chain still
    # growing at that step, and soft outcomes that converge in a few steps. Each group's loss must fall step by step
    # on its own (no group's step accepted on another's account) and each must end at its own single-group fit.
    chain = np.array([(k, k + 1, 1.0) for k in range(7)])
    soft = np.array([(a, b, 0.2 + 0.1 * (a + b)) for a, b in itertools.combinations(range(4), 2)])
    groups = [SATURATING, chain, soft]
    data = np.zeros((3, 13, 3))
    mask = np.zeros((3, 13), bool)
    for g, arr in enumerate(groups):
        data[g, :len(arr)], mask[g, :len(arr)] = arr, True
    prev = [eq10_loss(np.zeros(8), arr, L2_TINY) for arr in groups]
    for k in range(1, 26):
        fit = newton_soft_pairwise_batched(8, data, mask, l2=L2_TINY, max_iter=k)
        for g, arr in enumerate(groups):
            loss = eq10_loss(fit[g], arr, L2_TINY)
            assert loss <= prev[g] * (1 + 1e-12), f"group {g}: step {k} raised the loss"
            prev[g] = loss
    for g, arr in enumerate(groups):
        np.testing.assert_allclose(fit[g], newton_soft_pairwise_batched(8, arr[None], l2=L2_TINY)[0], atol=1e-9)
        assert np.abs(score_gradient(fit[g], arr, L2_TINY, mirror=True)).max() < 1e-10


def test_batched_reaches_the_optimum_when_only_the_ridge_holds_hard_wins():
    # hard wins along a tree (0 > 1 > 2 > 3 > 4 and 0 > 5): no MLE, so the strengths spread until a small ridge stops
    # them (|beta| ~ 20-30). The fit must still end where eq. 10's gradient vanishes, with the strengths in win order.
    tree = np.array([(0, 1, 1.0), (1, 2, 1.0), (2, 3, 1.0), (3, 4, 1.0), (0, 5, 1.0)])
    for l2 in (1e-6, 1e-8):
        beta = newton_soft_pairwise_batched(6, tree[None], l2=l2)[0]
        assert np.abs(score_gradient(beta, tree, l2, mirror=True)).max() < 1e-10
        assert np.all(np.diff(beta[:5]) < -10) and beta[0] - beta[5] > 20


def test_minmax_normalize_ties_are_scale_free_and_mirror_under_negation():
    # min-max scaling is unchanged by a positive factor and mirrored by negation (-beta ranks the items in reverse);
    # the rule that makes near-constant strengths a tie must keep both: its tolerance is relative to the larger
    # magnitude (scaling by a power of two above magnitude 1 is exact) whichever end of the range that is.
    hi = 2.0**-20 * 1e12  # 953674.31640625, where 1e-12 * hi is exactly 2^-20
    at_floor = np.array([hi - 2.0**-20, hi])  # a spread of exactly 1e-12 of the larger magnitude: still noise
    np.testing.assert_array_equal(minmax_normalize(at_floor), [0.5, 0.5])
    near_one = np.array([1.0, 1.0 + 1.5e-12, 1.0 + 0.75e-12])  # 1.5e-12 apart at magnitude 1: ranked
    np.testing.assert_allclose(minmax_normalize(near_one), [0.0, 1.0, 0.5], atol=1e-3)
    for b in (at_floor, near_one, np.array([-1.0, 3.0, 1.0])):
        np.testing.assert_allclose(minmax_normalize(-b), 1 - minmax_normalize(b), rtol=0, atol=1e-15)
    for k in range(1, 40, 3):
        np.testing.assert_array_equal(minmax_normalize(2.0**k * near_one), minmax_normalize(near_one))


def test_opt_soft_pairwise_runs_at_most_max_iter_iterations_and_says_when_it_stopped_short():
    # a chain of 450 items, each beating the next with o = 0.7, has a closed-form MLE (a tree: every gap is
    # logit(0.7), centred); L-BFGS-B needs over 1000 iterations for it, so the default cap of 1000 binds, and a fit
    # cut at its cap is an error naming the cap, never strengths returned as if they were the optimum.
    chain = [(k, k + 1, 0.7) for k in range(449)]
    mle = logit(0.7) * (224.5 - np.arange(450))
    np.testing.assert_allclose(opt_soft_pairwise(450, chain, l2=0.0, max_iter=3000), mle, atol=1e-3)
    for kwargs in ({}, {"max_iter": 1000}):
        with pytest.raises(NotConvergedError, match=r"450 items .* stopped after 1000 iterations .* raise max_iter"):
            opt_soft_pairwise(450, chain, l2=0.0, **kwargs)


def test_batched_fit_names_a_singular_newton_system_instead_of_numpys_bare_error():
    # one hard win between two items: only the ridge holds the optimum, and at l2 = 1e-17 the Hessian is singular
    # in float64; the error says which fit and what to change
    with pytest.raises(NotConvergedError, match=r"singular at l2=1e-17.*larger l2"):
        newton_soft_pairwise_batched(2, np.array([[[0, 1, 1.0]]]), l2=1e-17)
