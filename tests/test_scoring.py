import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from rewardkit.scoring import (
    diversity_stats,
    dr_grpo_advantages,
    get_scorer,
    grpo_advantages,
    reward_diversity,
    rloo_advantages,
    scorer_names,
    scorer_options,
)

rewards = arrays(np.float64, st.tuples(st.integers(1, 5), st.integers(2, 9)),
                 elements=st.integers(0, 100).map(lambda k: k / 100))  # rewards on a 0.01 grid


@given(rewards)
def test_grpo_is_zero_mean_and_unit_scale(r):
    a = grpo_advantages(r)
    assert np.allclose(a.mean(-1), 0, atol=1e-9)
    diverse = r.std(-1) > 1e-3
    assert np.allclose(a[diverse].std(-1), 1, atol=1e-3)
    assert np.all(a[~reward_diversity(r)] == 0)  # eq. 4: non-diverse -> zero advantage


@given(rewards)
def test_dr_grpo_and_rloo_are_zero_mean(r):
    assert np.allclose(dr_grpo_advantages(r).sum(-1), 0, atol=1e-9)
    assert np.allclose(rloo_advantages(r).sum(-1), 0, atol=1e-9)


def test_rloo_hand_example():
    # r = [1, 0, 0, 1]: baseline of response 0 is mean(0, 0, 1) = 1/3, so A_0 = 2/3; A_1 = 0 - 2/3
    a = rloo_advantages(np.array([1.0, 0.0, 0.0, 1.0]))
    assert np.allclose(a, [2 / 3, -2 / 3, -2 / 3, 2 / 3])


def test_grpo_hand_example():
    # r = [1, 0]: mean 1/2, population std 1/2 -> A = [+1, -1] (eq. 2)
    assert np.allclose(grpo_advantages(np.array([1.0, 0.0]), eps=0), [1, -1])


def test_masked_responses_are_left_out():
    r = np.array([[1.0, 0.0, np.nan, 1.0]])
    a = grpo_advantages(r)
    assert a[0, 2] == 0
    assert np.allclose(a[0, [0, 1, 3]], grpo_advantages(np.array([1.0, 0.0, 1.0])))


def test_diversity_counts():
    st_ = diversity_stats([np.ones(4), np.zeros(4), np.array([1, 0, 1, 1.0]), np.array([0.5, 0.5, np.nan, 0.5])])
    assert (st_.groups, st_.non_diverse, st_.all_correct, st_.all_incorrect) == (4, 3, 1, 1)
    assert st_.nonzero_advantage_fraction == pytest.approx(4 / 15)


def test_registry_lists_and_builds_verifier():
    assert "verifier" in scorer_names()
    names = {o.name: o for o in scorer_options("verifier")}
    assert names["timeout"].type == "float" and names["checker"].type == "AnswerChecker | None"
    assert names["timeout"].default == 5.0 and "seconds" in names["timeout"].help
    sc = get_scorer("verifier", timeout="2.5")
    assert sc.checker.timeout == 2.5
    with pytest.raises(TypeError, match="no option"):
        get_scorer("verifier", bogus="1")
    with pytest.raises(KeyError, match="unknown scorer"):
        get_scorer("nope")
