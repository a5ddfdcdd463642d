"""GAR's discriminator rewards (paper sec. 3): R^a only where answer correctness is known, probabilities in [0, 1].

Mutation-tested (benchmarks/mutation.py); the slice-level rewards' worked values are in test_slices.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rewardkit.gar.rewards import (
    alignment_reward,
    discriminator_reward,
    gan_reward,
    gan_slice_terms,
    judgment_rewards,
    reasoner_reward,
)


def test_no_alignment_term_when_the_traces_correctness_is_unknown():
    # a NO verdict on a generated slice: the GAN term is log(1 - M_d) with M_d clipped to eps, about 0;
    # R^a = 1 - |r^s - c| needs c, so an unknown correctness adds nothing (a wrong c=0 would add lambda4 * 1)
    r = judgment_rewards([0.0], [False], [None])
    assert r[0] == pytest.approx(math.log1p(-1e-6)) and abs(r[0]) < 1e-5
    assert judgment_rewards([1.0], [False], [None])[0] == pytest.approx(math.log(1e-6))


def test_alignment_term_follows_the_known_correctness():
    # the same NO verdict: it agrees with a wrong answer (c = 0, +lambda4) and disagrees with a right one (+0)
    wrong, right = judgment_rewards([0.0, 0.0], [False, False], [False, True], lambda4=0.5)
    assert wrong == pytest.approx(0.5, abs=1e-5) and right == pytest.approx(0.0, abs=1e-5)
    # a reference slice never has an R^a term, whatever its label says (sec. 3: R^a is over generated traces)
    assert judgment_rewards([1.0], [True], [True], lambda4=0.5)[0] == pytest.approx(0.0, abs=1e-5)


def test_lambdas_weigh_the_two_terms():
    # R^dis = lambda3 R^d + lambda4 R^a: a YES on a generated slice whose answer is right
    lam3, lam4 = 2.0, 0.25
    r = judgment_rewards([1.0], [False], [True], lambda3=lam3, lambda4=lam4)[0]
    assert r == pytest.approx(lam3 * math.log(1e-6) + lam4 * 1.0)


@pytest.mark.parametrize("bad", [1.2, -0.1, 1.0000001, -1e-9])
def test_probabilities_outside_0_1_are_refused(bad):
    # M_d(x) is a probability: one above 1 or below 0 is a bug upstream, never clipped into range silently
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        gan_reward([bad], [0.5])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        gan_reward([0.5], [bad])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        gan_slice_terms([bad], [True])


def test_probabilities_at_the_ends_of_the_range_are_accepted():
    # hard verdicts 0 and 1 are in range: clipped to [eps, 1 - eps], each side's mean is (log(1 - eps) + log eps) / 2
    assert gan_reward([1.0, 0.0], [0.0, 1.0]) == pytest.approx(math.log(1e-6) + math.log1p(-1e-6))


def test_paper_default_lambdas_and_eps():
    # sec. 3 defaults: lambda3 = 1, lambda4 = 0.5; a NO on a generated slice of a wrong trace agrees with it (R^a = 1)
    assert judgment_rewards([0.0], [False], [False])[0] == pytest.approx(math.log1p(-1e-6) + 0.5)
    # a YES on a reference slice: log(1 - eps) with eps = 1e-6, the clip that keeps a hard verdict finite
    assert judgment_rewards([1.0], [True], [None])[0] == pytest.approx(math.log1p(-1e-6))
    assert judgment_rewards([0.0], [True], [None])[0] == pytest.approx(math.log(1e-6))


def test_a_lambda_of_zero_switches_a_term_off_and_a_negative_one_is_refused():
    assert reasoner_reward(1.0, 0.5, lambda1=0.0) == 0.5 and reasoner_reward(1.0, 0.5, lambda2=0.0) == 1.0
    assert discriminator_reward(-2.0, 0.5, lambda3=0.0) == 0.25 and discriminator_reward(-2.0, 0.5, lambda4=0.0) == -2.0
    for kw in ({"lambda1": -0.1}, {"lambda2": -0.1}):
        with pytest.raises(ValueError, match="lambdas must be >= 0"):
            reasoner_reward(1.0, 1.0, **kw)
    for kw in ({"lambda3": -0.1}, {"lambda4": -0.1}):
        with pytest.raises(ValueError, match="lambdas must be >= 0"):
            discriminator_reward(0.0, 0.0, **kw)


def test_missing_probabilities_are_left_out_and_an_empty_side_is_refused():
    terms = gan_slice_terms([0.9, None, float("nan"), 0.2], [True, True, False, False])
    assert terms[0] == pytest.approx(math.log(0.9)) and terms[3] == pytest.approx(math.log(0.8))
    assert math.isnan(terms[1]) and math.isnan(terms[2])
    for ref, gen in (([0.5], []), ([], [0.5]), ([None], [0.5]), ([0.5], [float("nan")])):
        with pytest.raises(ValueError, match="needs reference and generated slices"):
            gan_reward(ref, gen)


def test_mismatched_lengths_are_refused():
    with pytest.raises(ValueError, match="2 probabilities for 1 labels"):
        gan_slice_terms([0.5, 0.5], [True])
    with pytest.raises(ValueError, match="2 traces, 1 labels"):
        alignment_reward([[1.0], [0.0]], [True])
    with pytest.raises(ValueError, match="2 scores, 2 kinds, 1 labels"):
        judgment_rewards([1.0, 0.0], [True, False], [None])


def test_the_clip_eps_is_the_one_given():
    # a hard YES on a generated slice scores log(eps): the eps passed in, not the default 1e-6
    assert judgment_rewards([1.0], [False], [None], eps=1e-3)[0] == pytest.approx(math.log(1e-3))
    assert judgment_rewards([1.0], [True], [None], eps=1e-3)[0] == pytest.approx(math.log1p(-1e-3))


def test_m_d_is_the_discriminators_probability_where_one_is_given():
    # sec. 3: R^d = E_ref log M_d(x) + E_gen log(1 - M_d(x)), M_d(x) "the discriminator's estimated probability that
    # slice x is real"; R^a still compares the sampled verdict r^s with the trace's correctness. By hand, lambda3 = 1,
    # lambda4 = 0.5: a reference judged YES at M_d = 0.8; a wrong trace's slice judged NO at M_d = 0.3 (agrees: +0.5);
    # a right trace's slice judged YES at M_d = 0.6 (agrees: +0.5)
    r = judgment_rewards([1.0, 0.0, 1.0], [True, False, False], [None, False, True], p_real=[0.8, 0.3, 0.6])
    assert r.tolist() == pytest.approx([math.log(0.8), math.log(0.7) + 0.5, math.log(0.4) + 0.5])
    # a disagreeing verdict loses R^a whatever its probability: NO on a right trace's slice at M_d = 0.3
    assert judgment_rewards([0.0], [False], [True], p_real=[0.3])[0] == pytest.approx(math.log(0.7))


def test_an_unread_judgment_stays_masked_whatever_its_probability():
    # a judgment with no verdict (None, or NaN) has no reward even when a probability was read at its place, and a
    # read verdict whose probability is missing has none either: never silently a number
    r = judgment_rewards([None, float("nan"), 1.0, 0.0], [True, False, False, True], [None, True, None, None],
                         p_real=[0.9, 0.9, None, 0.4])
    assert np.isnan(r[:3]).all() and r[3] == pytest.approx(math.log(0.4))


def test_one_probability_per_judgment():
    with pytest.raises(ValueError, match="2 probabilities for 1 judgments"):
        judgment_rewards([1.0], [True], [None], p_real=[0.5, 0.5])
    with pytest.raises(ValueError, match="1 probabilities for 2 judgments"):
        judgment_rewards([1.0, 0.0], [True, False], [None, None], p_real=[0.5])
