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
    assert m.f1.value == 0.0  # 2TP / (2TP + FP + FN) = 0 / 1: a missed correct response is an F1 of 0


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


# ------------------------------------------------ argument checks, defaults and edge cases, worked by hand

def test_pass_at_k_takes_integers_numpy_ones_too():
    for args in [(5.0, 2, 2), (5, 2.0, 2), (5, 2, 2.0), (5, True + 0.5, 1)]:
        with pytest.raises(TypeError, match="integers"):
            pass_at_k(*args)
    # numpy integers are integers: 1 - C(3,2)/C(5,2) = 0.7
    assert pass_at_k(np.int64(5), np.int32(2), np.int64(2)) == pytest.approx(0.7)
    with pytest.raises(ValueError, match="outside"):
        pass_at_k(8, -1, 1)
    # c = n: every k-subset holds a correct sample
    assert pass_at_k(3, 3, 1) == 1.0 and pass_at_k(1, 1, 1) == 1.0
    # n - c == k: exactly one k-subset (the wrong ones) fails: 1 - 1/C(4,2) = 5/6
    assert pass_at_k(4, 2, 2) == pytest.approx(5 / 6)


def test_labels_may_be_zero_one_integers_but_nothing_else():
    assert pass_at_k_groups([[1, 0, 0, 1]], 1) == pytest.approx(0.5)
    assert pass_at_k_groups([np.array([0, 1], dtype=np.int8)], 2) == 1.0
    assert avg_at_k([[0.0, 1.0, 1.0]], 3) == pytest.approx(2 / 3)
    for bad in ([[0, 2]], [[1, -1]], [[0.5, 1]]):
        with pytest.raises(ValueError, match="must be booleans"):
            pass_at_k_groups(bad, 1)
    # an empty group of no dtype is not a bad label (its size is 0), it is just too small for k = 1
    with pytest.raises(ValueError, match="larger than n=0"):
        avg_at_k([[]], 1)


def test_group_checks_and_their_messages():
    with pytest.raises(ValueError, match="pass@k: no groups"):
        pass_at_k_groups([], 1)
    for f in (avg_at_k, lambda c, k: maj_at_k([], c, k), lambda c, k: best_of_n([], c, k)):
        with pytest.raises(ValueError, match="no groups"):
            f([], 1)
    with pytest.raises(ValueError, match="avg@k: k must be >= 1, got k=0"):
        avg_at_k([[True]], 0)
    with pytest.raises(ValueError, match=r"avg@k: k=3 is larger than n=1 \(group 1, 2 group\(s\) too small\)"):
        avg_at_k([[True] * 3, [True], [False] * 4, [True, False]], 3)
    # k = 1 with one-sample groups is allowed (k == n)
    assert avg_at_k([[True], [False]], 1) == 0.5


def test_avg_at_k_uses_the_first_k_only():
    correct = [[True, False, False, False], [False, True, True, True]]
    assert avg_at_k(correct, 1) == 0.5  # (1 + 0) / 2
    assert avg_at_k(correct, 2) == 0.5  # (1/2 + 1/2) / 2
    assert avg_at_k(correct, 3) == pytest.approx((1 / 3 + 2 / 3) / 2)


def test_powers_of_two_edges():
    assert powers_of_two(0) == [] and powers_of_two(-3) == []
    assert powers_of_two(1) == [1] and powers_of_two(2) == [1, 2] and powers_of_two(3) == [1, 2]
    assert powers_of_two(16) == [1, 2, 4, 8, 16] and powers_of_two(31) == [1, 2, 4, 8, 16]
    # where a float log2 rounds up: log2(2**53 - 1) is 53.0 in binary64, and 2**53 is not <= n
    assert powers_of_two(2 ** 53 - 1)[-1] == 2 ** 52 and len(powers_of_two(2 ** 53 - 1)) == 53
    assert powers_of_two(np.int64(8)) == [1, 2, 4, 8]  # a count numpy computed


def test_misaligned_tables_are_refused_not_paired_shifted():
    # the same number of responses in all, grouped differently: pooled, they would pair each reward with another
    # response's label (AUC) or length (length bias) without a word
    rewards, labels = [[0.9, 0.1], [0.8]], [[True], [False, True]]
    for f, what in ((auc, "AUC"), (within_group_auc, "within-group AUC")):
        with pytest.raises(ValueError, match=f"^{what}: group 0 has 2 rewards and 1 labels$"):
            f(rewards, labels)
    with pytest.raises(ValueError, match="^AUC: 2 reward groups for 1 label groups$"):
        auc(rewards, [[True, False, True]])
    with pytest.raises(ValueError, match="^length bias: group 0 has 2 rewards and 1 lengths$"):
        length_bias(rewards, [[10], [20, 30]])
    with pytest.raises(ValueError, match="^length bias: group 1 has 1 rewards and 2 labels$"):
        length_bias(rewards, [[10, 20], [30]], [[True, False], [True, False]])
    for f, what in ((best_of_n, "best-of-N"), (verifier_metrics, "verifier metrics")):  # each names itself
        with pytest.raises(ValueError, match=f"^{what}: group 0 has 2 rewards and 1 labels$"):
            f(rewards, labels)


def test_no_groups_give_empty_results_not_numpy_errors():
    assert best_of_n_curve([], []) == {}
    assert all(math.isnan(v) for v in length_bias([], [], []).values())


class _Everything:
    """A stub answer checker for which every pair of answers is equivalent (one cluster per group)."""

    class _R:
        equivalent = True

    def check_many(self, pairs):
        return [self._R() for _ in pairs]


def test_maj_at_k_label_of_the_majority_is_its_first_response():
    # "5" wins 2 to 1; its first response (index 1) is labelled wrong, its second right: wrong
    assert maj_at_k([["4", "5", "5"]], [[True, False, True]], 3, cluster=False) == 0.0
    # and the other way round: right
    assert maj_at_k([["4", "5", "5"]], [[False, True, False]], 3, cluster=False) == 1.0
    # None never votes: the only answer "6" wins even though it is one response of three
    assert maj_at_k([[None, "6", None]], [[False, True, False]], 3, cluster=False) == 1.0
    assert maj_at_k([[None, None, "6"]], [[True, True, True]], 2, cluster=False) == 0.0  # first 2: no answer


def test_maj_at_k_passes_the_checker_to_the_vote():
    # with every answer equivalent there is one cluster, so the majority is the first response
    answers, correct = [["1", "2", "2"]], [[True, False, False]]
    assert maj_at_k(answers, correct, 3) == 0.0  # math-verify: "2" wins 2 to 1
    assert maj_at_k(answers, correct, 3, checker=_Everything()) == 1.0


def test_maj_at_k_shape_checks():
    with pytest.raises(ValueError, match="maj@k: 1 answer groups for 2 label groups"):
        maj_at_k([["1"]], [[True], [False]], 1)
    with pytest.raises(ValueError, match="group 0 has 1 answers and 2 labels"):
        maj_at_k([["1"]], [[True, False]], 1)
    with pytest.raises(ValueError, match=r"maj@k: k=3 is larger than n=2 \(group 0"):
        maj_at_k([["1", "1"]], [[True, False]], 3)


def test_best_of_n_counts_every_empty_group_and_checks_shapes():
    rewards = [[None, None], [None, None], [None, None], [0.3, 0.1]]
    correct = [[True, True], [True, True], [False, True], [True, False]]
    assert best_of_n(rewards, correct) == (0.25, 3)
    assert best_of_n(rewards, correct, 1) == (0.25, 3)
    with pytest.raises(ValueError, match="1 reward groups for 2 label groups"):
        best_of_n([[1.0]], [[True], [True]])
    with pytest.raises(ValueError, match="group 1 has 1 rewards and 2 labels"):
        best_of_n([[1.0, 0.0], [1.0]], [[True, True], [True, False]])
    with pytest.raises(ValueError, match="ties must be 'mean' or 'first'"):
        best_of_n([[1.0]], [[True]], ties="last")
    with pytest.raises(ValueError, match="k=3 is larger than n=2"):
        best_of_n([[1.0, 0.0]], [[True, True]], 3)
    # n defaults to the smallest group: the third response of group 0 is not a candidate
    assert best_of_n([[0.0, 0.1, 0.9], [0.5, 0.2]], [[False, True, False], [True, False]]) == (1.0, 0)


def test_best_of_n_picks_the_highest_not_the_lowest_and_ignores_masked_ties():
    rewards = [[0.1, 0.7, float("nan"), 0.3]]
    assert best_of_n(rewards, [[False, True, False, False]])[0] == 1.0
    assert best_of_n(rewards, [[True, False, True, True]])[0] == 0.0
    # negative rewards: the best is -1, not a masked one
    assert best_of_n([[-3.0, None, -1.0]], [[False, True, True]]) == (1.0, 0)


def test_rm_at_k_takes_the_first_best_by_default():
    rewards, correct = [[0.5, 0.9, 0.9, 0.9]], [[True, False, True, True]]
    assert rm_at_k(rewards, correct, 4) == 0.0  # the first 0.9 is wrong
    assert rm_at_k(rewards, correct, 4, ties="mean") == pytest.approx(2 / 3)
    assert rm_at_k(rewards, correct, 1) == 1.0  # only the first response


def test_expected_best_of_n_hand_worked_and_checks():
    # rewards 3, 2, 1 with labels F, T, T; pairs {3,2} {3,1} {2,1} pick F, F, T: 1/3
    assert expected_best_of_n([[3.0, 2.0, 1.0]], [[False, True, True]], 2) == pytest.approx(1 / 3)
    # two groups averaged: the second's pairs {masked, 0.5} {masked, 0.1} {0.5, 0.1} pick T, F, T (the masked
    # correct response is never picked)
    got = expected_best_of_n([[3.0, 2.0, 1.0], [None, 0.5, 0.1]], [[False, True, True], [True, True, False]], 2)
    assert got == pytest.approx((1 / 3 + 2 / 3) / 2)
    # n = 1 is the mean label over unmasked-and-masked draws (a masked draw is wrong): (0 + 1 + 0) / 3
    assert expected_best_of_n([[None, 0.5, 0.1]], [[True, True, False]], 1) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="1 reward groups for 2 label groups"):
        expected_best_of_n([[1.0]], [[True], [True]], 1)
    with pytest.raises(ValueError, match="best-of-N: group 1 has 1 rewards and 2 labels"):  # the group named
        expected_best_of_n([[1.0, 2.0], [1.0]], [[True, False], [True, False]], 1)
    with pytest.raises(ValueError, match="best-of-N: k=3 is larger than n=2"):
        expected_best_of_n([[1.0, 0.0]], [[True, True]], 3)


def test_best_of_n_curve_stops_at_the_smallest_group():
    curve = best_of_n_curve([[1.0, 0.0, 0.5], [0.0, 1.0]], [[True, False, False], [False, True]])
    assert list(curve) == [1, 2]
    # n = 1: mean label (1/3 + 1/2) / 2; n = 2: group 0 pairs {1,0} {1,.5} {0,.5} pick T, T, F, group 1 picks T
    assert curve[1] == pytest.approx((1 / 3 + 1 / 2) / 2)
    assert curve[2] == pytest.approx((2 / 3 + 1) / 2)


def test_interval_str_and_verifier_metrics_to_dict():
    from rewardkit.evals.metrics import Interval

    assert str(Interval(0.5, 0.25, 0.75)) == "0.500 [0.250, 0.750]"
    assert str(Interval(2 / 3, 0.0, 1.0)) == "0.667 [0.000, 1.000]"
    m = verifier_metrics([[1.0, 0.0, None]], [[True, True, False]], n_boot=20)
    d = m.to_dict()
    assert d["tp"] == 1 and d["fn"] == 1 and d["fp"] == 0 and d["tn"] == 0 and d["masked"] == 1
    assert d["threshold"] == 0.5 and d["precision"] == {"value": 1.0, "low": 1.0, "high": 1.0}
    assert d["recall"]["value"] == 0.5 and set(d) == {"precision", "recall", "f1", "accuracy", "tp", "fp", "fn",
                                                     "tn", "masked", "threshold"}


def test_verifier_metrics_threshold_is_inclusive_and_defaults_to_one_half():
    rewards, correct = [[0.5, 0.49, 0.7, 0.2]], [[True, True, False, False]]
    m = verifier_metrics(rewards, correct, n_boot=10)
    assert (m.tp, m.fn, m.fp, m.tn) == (1, 1, 1, 1)
    m = verifier_metrics(rewards, correct, threshold=0.45, n_boot=10)
    assert (m.tp, m.fn, m.fp, m.tn) == (2, 0, 1, 1) and m.threshold == 0.45
    # precision 2/3, recall 1, F1 = 2*2 / (2*2 + 1 + 0) = 4/5, accuracy 3/4
    assert (m.precision.value, m.recall.value, m.f1.value, m.accuracy.value) == pytest.approx((2 / 3, 1, 0.8, 0.75))


def test_verifier_metrics_each_undefined_metric_alone():
    # no positive label: recall undefined, precision 0 (one false positive), F1 0, accuracy 1/2
    m = verifier_metrics([[0.9, 0.1]], [[False, False]], n_boot=20)
    assert math.isnan(m.recall.value) and math.isnan(m.recall.low) and math.isnan(m.recall.high)
    assert m.precision.value == 0.0 and m.f1.value == 0.0 and m.accuracy.value == 0.5
    # only true negatives: precision, recall and F1 undefined, accuracy 1
    m = verifier_metrics([[0.1, 0.2]], [[False, False]], n_boot=20)
    assert all(math.isnan(x.value) for x in (m.precision, m.recall, m.f1))
    assert (m.accuracy.value, m.accuracy.low, m.accuracy.high) == (1.0, 1.0, 1.0)
    # everything masked: nothing defined, nothing counted
    m = verifier_metrics([[None, None]], [[True, False]], n_boot=20)
    assert all(math.isnan(x.value) for x in (m.precision, m.recall, m.f1, m.accuracy))
    assert (m.tp, m.fp, m.fn, m.tn, m.masked) == (0, 0, 0, 0, 2)
    # no groups at all
    m = verifier_metrics([], [], n_boot=20)
    assert all(math.isnan(x.value) and math.isnan(x.low) for x in (m.precision, m.recall, m.f1, m.accuracy))


def test_verifier_metrics_one_count_is_enough_for_a_value():
    # a single true positive: every metric is exactly 1 (a denominator of 1 is not "undefined")
    m = verifier_metrics([[0.9]], [[True]], n_boot=20)
    for iv in (m.precision, m.recall, m.f1, m.accuracy):
        assert (iv.value, iv.low, iv.high) == (1.0, 1.0, 1.0)
    m = verifier_metrics([[0.9], [0.1]], [[False], [False]], n_boot=20)
    assert m.precision.value == 0.0 and m.accuracy.value == 0.5


def test_verifier_metrics_shape_checks():
    with pytest.raises(ValueError, match="1 reward groups for 2 label groups"):
        verifier_metrics([[1.0]], [[True], [True]])
    with pytest.raises(ValueError, match="group 0 has 1 rewards and 2 labels"):
        verifier_metrics([[1.0]], [[True, False]])


def test_verifier_metrics_defaults_are_a_thousand_resamples_seed_zero():
    rng = np.random.default_rng(7)
    correct = rng.random((12, 4)) < 0.5
    rewards = rng.random((12, 4))
    assert verifier_metrics(rewards, correct) == verifier_metrics(rewards, correct, n_boot=1000, seed=0)
    assert verifier_metrics(rewards, correct) != verifier_metrics(rewards, correct, n_boot=999, seed=0)
    assert verifier_metrics(rewards, correct) != verifier_metrics(rewards, correct, n_boot=1000, seed=1)


def test_verifier_metrics_interval_is_the_2_5_and_97_5_percentile_of_the_group_bootstrap():
    # 15 one-response groups, all labelled correct, 10 predicted correct: a resample's recall (and accuracy) is
    # X / 15 with X ~ Binomial(15, 2/3). Exactly: P(X <= 5) = 0.0085, P(X <= 6) = 0.0308, P(X <= 12) = 0.9206,
    # P(X <= 13) = 0.9806, so the ideal bootstrap's 2.5% point is 6/15 and its 97.5% point 13/15 (the 3.5% and
    # 98.5% points would be 7/15 and 14/15). 20,000 resamples estimate those CDFs to about +-0.0012.
    from math import comb

    cdf = [sum(comb(15, j) * (2 / 3) ** j * (1 / 3) ** (15 - j) for j in range(x + 1)) for x in range(16)]
    assert cdf[5] < 0.02 and 0.028 < cdf[6] < 0.032 and cdf[12] < 0.95 and 0.978 < cdf[13] < 0.982
    rewards = [[1.0]] * 5 + [[0.0]] * 5 + [[1.0]] * 5
    m = verifier_metrics(rewards, [[True]] * 15, n_boot=20_000, seed=11)
    assert m.recall.value == pytest.approx(10 / 15)
    for iv in (m.recall, m.accuracy):
        assert (iv.low, iv.high) == pytest.approx((6 / 15, 13 / 15))
    assert (m.precision.low, m.precision.high) == (1.0, 1.0)  # no false positive in any resample


def test_auc_masks_and_single_class():
    assert math.isnan(auc([[0.3, 0.1]], [[False, False]]))
    # the only wrong response is masked: one class left
    assert math.isnan(auc([[0.3, None]], [[True, False]]))
    assert math.isnan(auc([], []))
    # pairs (correct, wrong): (0.8, 0.5) (0.8, 0.9) (0.2, 0.5) (0.2, 0.9) -> 1 of 4 ordered right
    assert auc([[0.8, 0.5], [0.2, 0.9, None]], [[True, False], [True, False, True]]) == pytest.approx(0.25)
    # a tie counts one half: pairs (0.5, 0.5) and (0.5, 0.1) -> (0.5 + 1) / 2
    assert auc([[0.5, 0.5, 0.1]], [[True, False, False]]) == pytest.approx(0.75)


def test_within_group_auc_uses_only_groups_with_both_classes_after_masking():
    rewards = [[0.9, 0.1], [0.2, 0.8, 0.5], [0.4, None], [None, None], [0.3, 0.3]]
    correct = [[True, False], [True, False, True], [True, False], [True, False], [True, True]]
    # group 0: 1; group 1: pairs (0.2, 0.8) (0.5, 0.8) -> 0; groups 2-4 have one class (or none) unmasked
    assert within_group_auc(rewards, correct) == (0.5, 2)
    val, used = within_group_auc([[0.4, None]], [[True, False]])
    assert math.isnan(val) and used == 0


def test_length_bias_masks_needs_three_and_varying_inputs():
    # masked rewards are left out: the rest rise with length
    assert length_bias([[1, None, 3, 4]], [[10, 99, 30, 40]])["spearman"] == pytest.approx(1.0)
    # three points are enough, two are not
    assert length_bias([[1, 2, 3]], [[30, 20, 10]])["spearman"] == pytest.approx(-1.0)
    assert math.isnan(length_bias([[1, 2]], [[1, 2]])["spearman"])
    assert math.isnan(length_bias([[1, 2, 3]], [[5, 5, 5]])["spearman"])  # constant length
    # ranks (1, 2, 3) against (1, 3, 2): rho = 1 - 6 * (0 + 1 + 1) / (3 * 8) = 1/2, over two groups
    assert length_bias([[1, 2], [3]], [[1, 3], [2]])["spearman"] == pytest.approx(0.5)
    assert "spearman_correct_only" not in length_bias([[1, 2, 3]], [[1, 2, 3]])


def test_length_bias_correct_only_leaves_out_wrong_and_masked():
    rewards = [[1, 2, 3, 4, None, 0]]
    lengths = [[10, 20, 30, 5, 1, 99]]
    correct = [[True, True, True, False, True, False]]
    lb = length_bias(rewards, lengths, correct)
    # correct and unmasked: rewards 1, 2, 3 with lengths 10, 20, 30
    assert lb["spearman_correct_only"] == pytest.approx(1.0)
    # all five unmasked: ranks of rewards (2, 3, 4, 5, 1), of lengths (2, 3, 4, 1, 5): d^2 = 0+0+0+16+16
    assert lb["spearman"] == pytest.approx(1 - 6 * 32 / (5 * 24))
    # two correct ones left: undefined
    assert math.isnan(length_bias([[1, 2, 3]], [[1, 2, 3]], [[True, True, False]])["spearman_correct_only"])


def test_cost_per_response_every_key_none_and_empty():
    costs = [{"judge_calls": 3, "prompt_tokens": 100, "completion_tokens": 40, "verifier_calls": None},
             {"prompt_tokens": 20, "completion_tokens": 8, "verifier_calls": 2, "cache_hits": 1, "seconds": 0.5}]
    c = cost_per_response(costs, 4)
    assert c == {
        "judge_calls_per_response": 0.75, "prompt_tokens_per_response": 30.0, "completion_tokens_per_response": 12.0,
        "verifier_calls_per_response": 0.5, "cache_hits_per_response": 0.25, "seconds_per_response": 0.125,
        "judge_calls_per_group": 1.5, "prompt_tokens_per_group": 60.0, "completion_tokens_per_group": 24.0,
        "verifier_calls_per_group": 1.0, "cache_hits_per_group": 0.5, "seconds_per_group": 0.25,
    }
    empty = cost_per_response([], 0)
    assert len(empty) == 12 and all(math.isnan(v) for v in empty.values())
    z = cost_per_response([{"seconds": 1.0}], 0)
    assert math.isnan(z["seconds_per_response"]) and z["seconds_per_group"] == 1.0


def test_undefined_metrics_are_nan_without_warnings():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 0/0 and all-NaN bootstrap rows are expected, not warned about
        m = verifier_metrics([[0.1, 0.2], [None, 0.3]], [[False, False], [True, False]], n_boot=50)
        assert all(math.isnan(x.value) for x in (m.precision, m.recall, m.f1))
        m = verifier_metrics([[None, None]], [[True, False]], n_boot=50)
        assert math.isnan(m.accuracy.value)


def test_masked_responses_are_counted_over_every_group():
    rewards = [[None, 0.9], [None, None, 0.1], [0.6]]
    correct = [[True, True], [False, True, False], [False]]
    m = verifier_metrics(rewards, correct, n_boot=20)
    assert m.masked == 3 and (m.tp, m.fp, m.fn, m.tn) == (1, 1, 0, 1)


def test_a_group_without_answers_or_rewards_does_not_stop_the_others():
    assert maj_at_k([[None, None], ["1", "1"], ["2", "3"]], [[True, True], [True, True], [True, False]],
                    2, cluster=False) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="best-of-N: no groups"):
        best_of_n([], [])


def test_pass_at_k_is_exactly_one_even_where_the_product_form_would_overflow():
    # n - c < k: every k-subset holds a correct sample. With c = n = k = 2000 the product's partial values
    # (1 - k/1)(1 - k/2)... pass 1e308 before its zero factor at i = k, so only the early return gives 1.
    assert pass_at_k(2000, 2000, 2000) == 1.0
    assert pass_at_k(2000, 1999, 1500) == 1.0


def test_zero_one_integer_labels_count_like_booleans():
    rewards = [[0.9, 0.2, 0.7], [0.1, None]]
    m_int = verifier_metrics(rewards, [[1, 1, 0], [0, 1]], n_boot=20)
    m_bool = verifier_metrics(rewards, [[True, True, False], [False, True]], n_boot=20)
    assert (m_int.tp, m_int.fp, m_int.fn, m_int.tn, m_int.masked) == (1, 1, 1, 1, 1)
    assert m_int == m_bool
    # within correct responses only (0/1 labels): rewards 3, 1, 2 against lengths 30, 10, 20 rise together
    lb = length_bias([[3, 1, 2, 0]], [[30, 10, 20, 5]], [[1, 1, 1, 0]])
    assert lb["spearman_correct_only"] == pytest.approx(1.0)


def test_undefined_rankings_are_nan_without_warnings():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scikit-learn and scipy warn on one class / constant input: not called
        assert math.isnan(auc([[0.3, 0.1]], [[True, True]]))
        assert math.isnan(auc([[0.3, 0.1]], [[False, False]]))
        val, used = within_group_auc([[0.3, 0.1], [0.5, None]], [[True, True], [True, False]])
        assert math.isnan(val) and used == 0
        assert math.isnan(length_bias([[1, 1, 1]], [[1, 2, 3]])["spearman"])  # constant reward
        assert math.isnan(length_bias([[1, 2, 3]], [[7, 7, 7]])["spearman"])  # constant length


def test_length_bias_binary_rewards_and_lengths_one_apart():
    # rewards ranks (1.5, 1.5, 3) against lengths (1, 2, 3): deviations (-.5, -.5, 1) and (-1, 0, 1),
    # rho = 1.5 / sqrt(1.5 * 2) = sqrt(3) / 2 (a range of exactly 1 is not constant)
    for rewards in ([[False, False, True]], [[0, 0, 1]], [[0.0, 0.0, 1.0]]):
        assert length_bias(rewards, [[1, 2, 3]])["spearman"] == pytest.approx(math.sqrt(3) / 2)
    assert length_bias([[1.0, 2.0, 3.0]], [[10, 10, 11]])["spearman"] == pytest.approx(math.sqrt(3) / 2)
