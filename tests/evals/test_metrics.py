"""Metrics: hand-worked values, the Codex estimator against brute-force subset enumeration, properties,
scikit-learn as an independent oracle, and the real shared rollouts."""

import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rewardkit.evals.data import rollouts_path
from rewardkit.evals.metrics import (
    auc,
    avg_at_k,
    best_of_n,
    best_of_n_curve,
    cost_per_response,
    expected_best_of_n,
    length_bias,
    maj_at_k,
    pass_at_k,
    pass_at_k_groups,
    powers_of_two,
    rm_at_k,
    verifier_metrics,
    within_group_auc,
)


def test_pass_at_k_hand_worked():
    # 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    # 1 - C(7,5)/C(10,5) = 1 - 21/252
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - 21 / 252)
    assert pass_at_k(8, 0, 8) == 0.0
    assert pass_at_k(8, 1, 8) == 1.0  # n - c = 7 < k = 8: exactly 1


def test_pass_at_k_codex_definition_large_n():
    # Chen et al. 2021 eq. 1 with exact big integers, n = 200 as in the paper's evaluation
    for c, k in [(1, 1), (13, 10), (57, 100), (190, 5)]:
        exact = 1 - math.comb(200 - c, k) / math.comb(200, k)
        assert pass_at_k(200, c, k) == pytest.approx(exact, rel=1e-12, abs=1e-15)


@given(st.integers(1, 9).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
@settings(max_examples=60, deadline=None)
def test_pass_at_k_is_probability_some_of_k_subset_is_correct(nck):
    n, c, k = nck
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    brute = sum(any(samples[i] for i in s) for s in subsets) / len(subsets)
    assert pass_at_k(n, c, k) == pytest.approx(brute)


@given(st.integers(1, 30).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
@settings(max_examples=60, deadline=None)
def test_pass_at_1_is_c_over_n_and_monotone_in_k(nc):
    n, c = nc
    assert pass_at_k(n, c, 1) == pytest.approx(c / n)
    vals = [pass_at_k(n, c, k) for k in range(1, n + 1)]
    assert all(b >= a - 1e-12 for a, b in zip(vals, vals[1:]))


def test_pass_at_k_errors():
    with pytest.raises(ValueError, match="k=9 is larger than the n=8"):
        pass_at_k(8, 3, 9)
    with pytest.raises(ValueError, match="k must be >= 1"):
        pass_at_k(8, 3, 0)
    with pytest.raises(ValueError, match="outside"):
        pass_at_k(8, 9, 1)
    with pytest.raises(ValueError, match="larger than n=2"):
        avg_at_k([[True, False], [True, True, False]], 3)


def test_groups_and_order_invariance():
    correct = [[True, False, False, True], [False] * 4, [True] * 4]
    assert pass_at_k_groups(correct, 1) == pytest.approx((0.5 + 0 + 1) / 3)
    shuffled = [list(reversed(g)) for g in correct]
    for k in (1, 2, 4):
        assert pass_at_k_groups(correct, k) == pass_at_k_groups(shuffled, k)
    assert avg_at_k(correct, 2) == pytest.approx((0.5 + 0 + 1) / 3)
    assert avg_at_k(correct, 4) == pytest.approx(pass_at_k_groups(correct, 1))
    assert powers_of_two(8) == [1, 2, 4, 8] and powers_of_two(6) == [1, 2, 4]


def test_maj_at_k_uses_equivalence_aware_vote():
    # 1/2 and 0.5 are one vote (2 votes) against 3 once: the majority 1/2 is correct
    answers = [["3", "1/2", "0.5"], ["7", "7", "8"]]
    correct = [[False, True, True], [False, False, True]]
    assert maj_at_k(answers, correct, 3) == pytest.approx(0.5)
    # without clustering, every answer has one vote and the first ("3") wins the tie
    assert maj_at_k(answers, correct, 3, cluster=False) == pytest.approx(0.0)
    # k=1 is the first sample's label
    assert maj_at_k(answers, correct, 1) == pytest.approx(0.0)
    # no answer at all counts as wrong
    assert maj_at_k([[None, None]], [[True, True]], 2) == 0.0


def test_best_of_n_masking_and_ties():
    rewards = [[0.2, None, 0.9, 0.9], [None, None, None, None], [1.0, 0.0, 0.0, 0.0]]
    correct = [[True, True, False, True], [True] * 4, [False, True, True, True]]
    # group 1: tied best at 0.9 -> mean(False, True) = 0.5; the masked (correct) one is never picked
    # group 2: nothing selectable -> wrong, counted; group 3: picks the wrong one
    acc, empty = best_of_n(rewards, correct)
    assert acc == pytest.approx(0.5 / 3) and empty == 1
    acc_first, _ = best_of_n(rewards, correct, ties="first")
    assert acc_first == 0.0
    # n=1 uses the first response only
    assert best_of_n(rewards, correct, 1)[0] == pytest.approx(1 / 3)
    curve = best_of_n_curve(rewards, correct)
    assert list(curve) == [1, 2, 3, 4]


def test_best_of_n_oracle_and_order_invariance_with_mean_ties():
    rng = np.random.default_rng(1)
    correct = rng.random((50, 8)) < 0.4
    oracle = correct.astype(float)
    assert best_of_n(oracle, correct)[0] == pytest.approx(np.mean(correct.any(1)))
    r = rng.integers(0, 3, size=(50, 8)).astype(float)  # many ties
    perm = rng.permutation(8)
    assert best_of_n(r, correct)[0] == pytest.approx(best_of_n(r[:, perm], correct[:, perm])[0])


def test_verifier_metrics_against_sklearn():
    from sklearn.metrics import accuracy_score, precision_recall_fscore_support

    rng = np.random.default_rng(0)
    correct = rng.random((40, 8)) < 0.6
    rewards = np.where(rng.random((40, 8)) < 0.8, correct, ~correct).astype(float)
    rewards[0, :3] = np.nan
    m = verifier_metrics(rewards, correct, n_boot=300, seed=3)
    ok = np.isfinite(rewards)
    p, r, f, _ = precision_recall_fscore_support(correct[ok], rewards[ok] >= 0.5, average="binary")
    assert (m.precision.value, m.recall.value, m.f1.value) == pytest.approx((p, r, f))
    assert m.accuracy.value == pytest.approx(accuracy_score(correct[ok], rewards[ok] >= 0.5))
    assert m.masked == 3 and m.tp + m.fp + m.fn + m.tn == 40 * 8 - 3
    for iv in (m.precision, m.recall, m.f1, m.accuracy):
        assert iv.low <= iv.value <= iv.high and iv.high - iv.low < 0.2
    # seeded: the same seed gives the same interval, another seed a different one
    assert verifier_metrics(rewards, correct, n_boot=300, seed=3).f1 == m.f1
    assert verifier_metrics(rewards, correct, n_boot=300, seed=4).f1 != m.f1


def test_verifier_metrics_undefined_precision_is_nan_not_zero():
    m = verifier_metrics([[0.0, 0.0]], [[True, False]], n_boot=50)
    assert math.isnan(m.precision.value) and str(m.precision) == "undefined"
    assert m.recall.value == 0.0


def test_auc_and_length_bias():
    correct = [[True, False, True, False], [True, True, False, False]]
    perfect = [[1.0, 0.0, 0.9, 0.1], [0.8, 0.7, 0.2, None]]
    assert auc(perfect, correct) == 1.0
    assert auc([[0, 1, 0, 1]], [[True, False, True, False]]) == 0.0
    assert math.isnan(auc([[1.0, 0.5]], [[True, True]]))
    assert within_group_auc(perfect, correct) == (1.0, 2)
    lb = length_bias([[1, 2, 3, 4]], [[10, 20, 30, 40]])
    assert lb["spearman"] == pytest.approx(1.0)
    lb = length_bias([[4, 3, 2, 1]], [[10, 20, 30, 40]], [[True] * 4])
    assert lb["spearman"] == pytest.approx(-1.0) and lb["spearman_correct_only"] == pytest.approx(-1.0)
    assert math.isnan(length_bias([[1, 1, 1]], [[1, 2, 3]])["spearman"])


def test_cost_per_response():
    c = cost_per_response([{"judge_calls": 4, "seconds": 2.0}, {"judge_calls": 2, "seconds": 1.0}], 12)
    assert c["judge_calls_per_response"] == 0.5 and c["seconds_per_group"] == 1.5


def test_shared_rollouts_published_stats_and_rm_at_8():
    rows = [json.loads(line) for line in open(rollouts_path())]
    correct = [r["correct"] for r in rows]
    # the data README: 728/800 correct, 86 problems all correct, 4 none correct
    assert pass_at_k_groups(correct, 1) == pytest.approx(728 / 800)
    assert pass_at_k_groups(correct, 8) == pytest.approx(96 / 100)
    assert avg_at_k(correct, 8) == pytest.approx(0.91)
    # RM@8 can not beat the oracle (pass@8) and the oracle selector reaches it
    rm8 = rm_at_k([r["rm_scores"] for r in rows], correct, 8)
    assert pass_at_k_groups(correct, 1) <= rm8 <= 0.96
    assert best_of_n([np.asarray(c, float) for c in correct], correct)[0] == pytest.approx(0.96)


# ------------------------------------------------ best-of-n over random subsets: compares with pass@n (select.png)

def _enumerated_best_of_n(r, c, n):
    """Best-of-n averaged over every n-subset, ties by mean, masked never picked: the definition, by brute force."""
    vals = []
    for sub in itertools.combinations(range(len(r)), n):
        ok = [i for i in sub if r[i] is not None]
        if not ok:
            vals.append(0.0)
            continue
        top = max(r[i] for i in ok)
        vals.append(np.mean([c[i] for i in ok if r[i] == top]))
    return float(np.mean(vals))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 3).map(float)), st.booleans()), min_size=1, max_size=7),
       st.data())
def test_expected_best_of_n_equals_the_mean_over_every_subset(group, data):
    r, c = [x for x, _ in group], [y for _, y in group]
    n = data.draw(st.integers(1, len(r)))
    got = expected_best_of_n([r], [c], n)
    assert got == pytest.approx(_enumerated_best_of_n(r, c, n))
    assert got <= pass_at_k(len(c), sum(c), n) + 1e-12  # no selector beats the oracle


def test_best_of_n_curve_compares_like_with_like_on_the_shared_rollouts():
    rows = [json.loads(line) for line in open(rollouts_path())]
    correct = [np.array(r["correct"], dtype=bool) for r in rows]
    labels = [c.astype(float) for c in correct]  # a perfect verifier
    curve = best_of_n_curve(labels, correct)
    for n in range(1, 9):
        assert curve[n] == pytest.approx(pass_at_k_groups(correct, n))  # a perfect selector is the oracle
        assert best_of_n_curve([np.zeros(8)] * len(rows), correct)[n] == pytest.approx(np.mean(correct))  # random
    # first-n samples against expected pass@n (select.png before): the perfect verifier drawn above the oracle
    assert best_of_n(labels, correct, 2)[0] > pass_at_k_groups(correct, 2)
    assert curve[8] == best_of_n(labels, correct)[0] == pytest.approx(0.96)
