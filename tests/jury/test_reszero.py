"""JURY-RL's ResZero (eq. 5) edge cases, hand-computed from the equation (mutation-tested by benchmarks/mutation.py).

The paper's worked example and the zero-sum properties are in test_proof_gate.py."""

from __future__ import annotations

from fractions import Fraction

import pytest

from rewardkit.jury.reszero import reszero_exact, reszero_rewards


def test_responses_without_an_answer_support_no_one():
    # G = 6, M = {a} (3 votes): alpha = 1/2, gamma = c alpha^2 = 1/40 at c = 1/10. The residuals are None, None, b:
    # a missing answer shares its answer with nobody, so every z_i = 0, u_bar = 0 and each residual gets gamma.
    # (Two Nones counted as one answer would give them z = 1/2 and 1/12 + 1/40 each.)
    r = reszero_exact(["a", "a", "a", None, None, "b"], c=Fraction(1, 10))
    assert r == [Fraction(-1, 40)] * 3 + [Fraction(1, 40)] * 3


def test_no_answers_and_an_absent_majority_give_no_reward():
    assert reszero_exact([]) == [] and reszero_rewards([]).tolist() == []
    assert reszero_exact(["a", "b", "b"], c=Fraction(1, 10), majority="z") == [0, 0, 0]  # alpha = 0 (App. A.2)
    assert reszero_exact(["a", "b", "b"], c=Fraction(1, 10), majority=None) == [0, 0, 0]


def test_two_residual_answers_share_support_leave_one_out():
    # G = 5, M = {a} x 2: alpha = 2/5, gamma = c alpha^2 = 2/125 at c = 1/10; residuals b, b, c (|R| = 3):
    # z_b = 1/2 (the other b among the 2 others), z_c = 0, u_bar = 1/3
    r = reszero_exact(["a", "a", "b", "b", "c"], c=Fraction(1, 10))
    gamma, alpha = Fraction(2, 125), Fraction(2, 5)
    assert r[:2] == [-Fraction(1, 10) * alpha + gamma] * 2
    assert r[2:4] == [alpha * (Fraction(1, 2) - Fraction(1, 3)) + gamma] * 2
    assert r[4] == alpha * (0 - Fraction(1, 3)) + gamma
    assert reszero_rewards(["a", "a", "b", "b", "c"], c=0.1) == pytest.approx([float(x) for x in r])


def test_float_form_default_c_and_given_majority():
    # default c = 0.01: G = 3, M = {a} x 2, alpha = 2/3, gamma = 0.01 * 4/9; the single residual gets gamma
    assert reszero_rewards(["a", "a", "b"]) == pytest.approx([-0.02 / 9, -0.02 / 9, 0.04 / 9], abs=1e-15)
    assert reszero_rewards(["a", "a", "b"], majority="b").tolist() == pytest.approx(
        [float(x) for x in reszero_exact(["a", "a", "b"], c=0.01, majority="b")])
    assert reszero_rewards(["a", "a", "b"], majority="z").tolist() == [0.0, 0.0, 0.0]
