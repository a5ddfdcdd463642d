"""JURY-RL's ResZero (eq. 5) edge cases, hand-computed from the equation (mutation-tested by benchmarks/mutation.py).

The paper's worked example and the zero-sum properties are in test_proof_gate.py."""

from __future__ import annotations

from fractions import Fraction

from rewardkit.jury.reszero import reszero_exact


def test_responses_without_an_answer_support_no_one():
    # G = 6, M = {a} (3 votes): alpha = 1/2, gamma = c alpha^2 = 1/40 at c = 1/10. The residuals are None, None, b:
    # a missing answer shares its answer with nobody, so every z_i = 0, u_bar = 0 and each residual gets gamma.
    # (Two Nones counted as one answer would give them z = 1/2 and 1/12 + 1/40 each.)
    r = reszero_exact(["a", "a", "a", None, None, "b"], c=Fraction(1, 10))
    assert r == [Fraction(-1, 40)] * 3 + [Fraction(1, 40)] * 3
