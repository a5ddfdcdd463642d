"""JURY-RL maths and scorers: majority vote, ResZero (eq. 5), proof gate (eq. 4), fallbacks (Table 3)."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardkit.jury.proof_gate import (
    BaseVerifier,
    Claim,
    ProofGateScorer,
    ReferenceVerifier,
    VerifyResult,
    proof_gate_rewards,
)
from rewardkit.jury.reszero import reszero_exact, reszero_rewards
from rewardkit.jury.vote import majority_vote, vote
from rewardkit.scoring import get_scorer
from rewardkit.types import Cost, Group, Status

# ------------------------------------------------------------------------------------ App. B.2


def test_worked_example_app_b2_exact():
    # G = 8: |M| = 4 (a-hat), three b, one c; c = 0.1 -> alpha = 1/2, gamma = 0.025.
    r = reszero_exact(["a"] * 4 + ["b"] * 3 + ["c"], c=Fraction(1, 10))
    assert r[:4] == [Fraction(-1, 40)] * 4  # -c*alpha + gamma = -0.05 + 0.025
    # alpha * (2/3 - 1/2) + gamma = 1/12 + 1/40 (the paper prints ~0.0667 for this; eq. 5 gives 13/120)
    assert r[4:7] == [Fraction(1, 12) + Fraction(1, 40)] * 3
    assert r[7] == Fraction(-9, 40)  # 0.5 * (0 - 0.5) + 0.025 = -0.225
    assert sum(r) == 0


def test_worked_example_float_form():
    r = reszero_rewards(["a"] * 4 + ["b"] * 3 + ["c"], c=0.1)
    np.testing.assert_allclose(r, [-0.025] * 4 + [0.025 + 1 / 12] * 3 + [-0.225], rtol=0, atol=1e-15)
    assert abs(r.sum()) < 1e-15


# ---------------------------------------------------------------------------------- edge cases


def test_all_equal_gives_zero():
    assert reszero_exact(["x"] * 8, c=Fraction(1, 100)) == [0] * 8


def test_single_residual_gets_gamma():
    # |R| = 1: no leave-one-out peers, z = u_bar = 0, so the residual gets gamma = c * alpha^2.
    r = reszero_exact(["x"] * 7 + ["y"], c=Fraction(1, 10))
    alpha = Fraction(7, 8)
    assert r[7] == Fraction(1, 10) * alpha**2
    assert r[0] == -Fraction(1, 10) * alpha + Fraction(1, 10) * alpha**2
    assert sum(r) == 0


def test_majority_tie_uses_first_appearance():
    v = vote(["b", "a", "a", "b", "c"])
    assert v.majority == "b" and v.candidates == ("b", "a", "c") and v.counts == (2, 2, 1)
    r = reszero_exact(["b", "a", "a", "b", "c"], c=Fraction(1, 10))
    assert r[0] == r[3] < 0  # the tie-broken majority is penalised
    assert r[1] == r[2] > r[4]  # residual "a" has support, "c" has none
    assert sum(r) == 0


def test_explicit_majority_override():
    r = reszero_exact(["b", "a", "a", "b"], c=Fraction(1, 10), majority="a")
    assert r[1] == r[2] < 0 and r[0] == r[3] > 0


def test_no_answers_at_all():
    assert vote([None, None]).majority is None
    assert reszero_exact([None, None, None]) == [0, 0, 0]


def test_none_answers_are_residuals_without_support():
    r = reszero_exact(["a", "a", None, None], c=Fraction(1, 10))
    assert r[2] == r[3]  # two Nones do not support each other, so they are equal...
    assert sum(r) == 0


def test_vote_ignores_none_and_ranks_top_k():
    v = vote([None, "x", "y", "y", None, "z", "x", "y"])
    assert v.top(2) == ("y", "x")
    assert v.share == pytest.approx(3 / 8)
    assert v.mask("y").tolist() == [False, False, True, True, False, False, False, True]


@pytest.mark.parametrize("to_numpy", [lambda xs: np.array(xs, dtype=np.int64), lambda xs: np.array(xs).astype(np.str_)])
def test_numpy_scalar_labels_match_python_labels(to_numpy):
    """numpy int64 / np.str_ labels (e.g. cluster ids from an array) give the same exact rewards as plain
    Python labels; np.int64 counts inside Fraction arithmetic used to overflow (wrong values, then
    OverflowError at G = 16)."""
    rng = np.random.default_rng(0)
    for g in (8, 16, 64):
        plain = [int(x) for x in rng.integers(0, 5, g)]
        labels = to_numpy(plain)
        exact = reszero_exact(labels, c=Fraction(13, 1000))
        assert exact == reszero_exact(plain, c=Fraction(13, 1000))
        assert sum(exact) == 0
        assert reszero_rewards(labels).tolist() == reszero_rewards(plain).tolist()


# ---------------------------------------------------------------------------------- properties

labels_st = st.lists(st.one_of(st.none(), st.sampled_from("abcde")), min_size=1, max_size=16)
c_st = st.fractions(min_value=0, max_value=1, max_denominator=1000)


@given(labels_st, c_st)
@settings(max_examples=300, deadline=None)
def test_reszero_sums_exactly_to_zero(labels, c):
    assert sum(reszero_exact(labels, c=c)) == 0


@given(labels_st, st.floats(0, 1))
@settings(max_examples=200, deadline=None)
def test_reszero_float_mean_is_zero(labels, c):
    assert abs(reszero_rewards(labels, c=c).sum()) < 1e-12


@given(labels_st, c_st)
@settings(max_examples=200, deadline=None)
def test_reszero_structure(labels, c):
    r = reszero_exact(labels, c=c)
    v = vote(labels)
    if v.majority is None:
        assert all(x == 0 for x in r)
        return
    m = v.mask(v.majority)
    alpha = Fraction(int(m.sum()), len(labels))
    # every majority response gets the same penalty -c*alpha + c*alpha^2 <= 0
    assert {r[i] for i in range(len(r)) if m[i]} == {-c * alpha + c * alpha**2}
    # residuals carrying the same (non-None) answer get the same reward, more support never less reward
    res = [i for i in range(len(r)) if not m[i]]
    for i in res:
        for j in res:
            if labels[i] is not None and labels[i] == labels[j]:
                assert r[i] == r[j]
            ni = sum(labels[k] == labels[i] for k in res) if labels[i] is not None else 1
            nj = sum(labels[k] == labels[j] for k in res) if labels[j] is not None else 1
            if ni > nj:
                assert r[i] > r[j]


@given(st.lists(st.sampled_from("abc"), min_size=2, max_size=12), st.randoms(use_true_random=False))
@settings(max_examples=200, deadline=None)
def test_reszero_permutation_equivariant_without_ties(labels, rnd):
    v = vote(labels)
    if len(v.counts) > 1 and v.counts[0] == v.counts[1]:
        return  # a tie: the first-appearance rule is order dependent by design
    perm = list(range(len(labels)))
    rnd.shuffle(perm)
    r = reszero_exact(labels, c=Fraction(1, 7))
    rp = reszero_exact([labels[i] for i in perm], c=Fraction(1, 7))
    assert rp == [r[i] for i in perm]


@given(st.lists(st.sampled_from("abc"), min_size=2, max_size=12))
@settings(max_examples=100, deadline=None)
def test_reszero_has_variance_when_residuals_differ(labels):
    # App. A.3: non-zero variance whenever the group is not unanimous and c > 0
    r = reszero_rewards(labels, c=0.01)
    assert (np.std(r) > 0) == (len(set(labels)) > 1)


# -------------------------------------------------------------------------------- gate rewards


def test_gate_verified_rewards_the_verified_answer_only():
    np.testing.assert_array_equal(proof_gate_rewards(list("aabca"), "a"), [1, 1, 0, 0, 1])
    # top-k: the second candidate verified
    np.testing.assert_array_equal(proof_gate_rewards(list("aabca"), "b"), [0, 0, 1, 0, 0])


def test_gate_fallbacks():
    labels = list("aaabbc")
    np.testing.assert_array_equal(proof_gate_rewards(labels, None, fallback="zero"), np.zeros(6))
    np.testing.assert_array_equal(proof_gate_rewards(labels, None, fallback="mv"), [1, 1, 1, 0, 0, 0])
    np.testing.assert_allclose(proof_gate_rewards(labels, None, fallback="reszero", c=0.1),
                               reszero_rewards(labels, c=0.1))
    import random

    picks = {tuple(proof_gate_rewards(labels, None, fallback="random", rng=random.Random(s))) for s in range(40)}
    assert picks == {(1, 1, 1, 0, 0, 0), (0, 0, 0, 1, 1, 0), (0, 0, 0, 0, 0, 1)}
    with pytest.raises(ValueError, match="unknown fallback"):
        proof_gate_rewards(labels, None, fallback="oops")  # type: ignore[arg-type]


# ---------------------------------------------------------------------- equivalence-aware voting


def test_equivalent_answers_are_one_vote():
    v, reps = majority_vote(["0.5", "3", "\\frac{1}{2}", "3", "1/2", None])
    assert v.counts == (3, 2)
    assert reps[v.majority] == "0.5"
    assert v.mask(v.majority).tolist() == [True, False, True, False, True, False]


# ------------------------------------------------------------------------------------- scorers




def _group(row) -> Group:
    return Group(row["id"], row["problem"], row["responses"], reference=row["answer"], labels=row["correct"])


@pytest.fixture(scope="module")
def mixed_groups(rollouts_path):
    rows = {r["id"]: r for r in map(json.loads, rollouts_path.open())}
    return {k: _group(rows[k]) for k in ("math_cot_100-006", "math_cot_100-028", "math_cot_100-092")}


def test_majority_vote_scorer_on_real_rollouts(mixed_groups):
    (s6, s28) = get_scorer("majority-vote").score([mixed_groups["math_cot_100-006"], mixed_groups["math_cot_100-028"]])
    # 006: 3/8 is the plurality (3 votes), exactly the labelled-correct responses
    np.testing.assert_array_equal(s6.rewards, np.array(mixed_groups["math_cot_100-006"].labels, float))
    # 028: 11 and 4 tie at 2 votes; 11 appears first and wins although 4 is correct
    assert s28.stats["majority_answer"] == "11"
    np.testing.assert_array_equal(s28.rewards, [1, 1, 0, 0, 0, 0, 0, 0])


def test_proof_gate_with_reference_verifier(mixed_groups):
    g6, g28 = mixed_groups["math_cot_100-006"], mixed_groups["math_cot_100-028"]
    s6, s28 = ProofGateScorer(verifier="reference", c=0.01).score([g6, g28])
    assert s6.stats["gate"] == "verified"
    np.testing.assert_array_equal(s6.rewards, np.array(g6.labels, float))
    assert s28.stats["gate"] == "refuted" and s28.stats["fallback"] == "reszero"
    assert abs(s28.rewards.sum()) < 1e-12
    assert s28.rewards[0] == s28.rewards[1] < 0  # the unverified majority "11" is penalised
    assert s6.cost.verifier_calls + s6.cost.cache_hits == 1  # one verification per group


def test_proof_gate_top_k_finds_the_second_candidate(mixed_groups):
    g28 = mixed_groups["math_cot_100-028"]
    (s,) = ProofGateScorer(verifier="reference", top_k=2).score([g28])
    assert s.stats["gate"] == "verified" and s.stats["verified_answer"] == "4"
    np.testing.assert_array_equal(s.rewards, np.array(g28.labels, float))
    assert [v["outcome"] for v in s.extra["verifications"]] == ["refuted", "verified"]


class _Scripted(BaseVerifier):
    """Test double: returns scripted outcomes and records each batched call."""

    name = "scripted"

    def __init__(self, outcomes):
        self.outcomes, self.calls = list(outcomes), []

    def verify_many(self, claims):
        self.calls.append(list(claims))
        return [VerifyResult(self.outcomes.pop(0), "scripted", Cost(verifier_calls=1)) for _ in claims]


def test_one_batched_verifier_call_per_round_and_inconclusive_fallbacks():
    groups = [Group(f"g{i}", "p", ["\\boxed{2}", "\\boxed{2}", "\\boxed{3}", "\\boxed{5}"]) for i in range(3)]
    ver = _Scripted(["verified", "inconclusive", "refuted"])
    scores = ProofGateScorer(verifier=ver, fallback="zero").score(groups)
    assert len(ver.calls) == 1 and [c.answer for c in ver.calls[0]] == ["2", "2", "2"]
    assert [s.stats["gate"] for s in scores] == ["verified", "inconclusive", "refuted"]
    np.testing.assert_array_equal(scores[0].rewards, [1, 1, 0, 0])
    np.testing.assert_array_equal(scores[1].rewards, [0, 0, 0, 0])
    assert all(st is Status.OK for s in scores for st in s.statuses)


def test_scorer_options_from_registry():
    s = get_scorer("proof-gate", verifier="reference", fallback="mv", c="0.1", top_k="2")
    assert (s.options.fallback, s.options.c, s.options.top_k) == ("mv", 0.1, 2)
    with pytest.raises(ValueError):
        get_scorer("proof-gate", verifier="reference", fallback="median")


def test_no_default_verifier_reads_labels(monkeypatch, tmp_path):
    """JURY-RL's gate is label-free: the reference (oracle) verifier is used only when named (issue 11)."""
    from rewardkit.jury.proof_gate import ProofGateOptions

    assert ProofGateOptions().verifier == "lean"
    # a machine without any Lean checker: the default refuses clearly instead of falling back to labels
    monkeypatch.delenv("LEAN_EXE", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ValueError, match="verifier=llm-judge.*verifier=reference.*oracle"):
        get_scorer("proof-gate")


def test_every_row_names_its_verifier(mixed_groups):
    from rewardkit.testing import ScriptedJudge

    g6, g28 = mixed_groups["math_cot_100-006"], mixed_groups["math_cot_100-028"]
    (ref,) = ProofGateScorer(verifier="reference").score([g6])
    assert ref.stats["verifier"] == "reference" and ref.to_row()["stats"]["verifier"] == "reference"
    # label-free: an LLM judge that calls every majority answer correct verifies 028's wrong majority "11"
    judge = ScriptedJudge(reply="The answer is right.\nFinal judgment: True")
    (s,) = get_scorer("proof-gate", verifier="llm-judge", judge=judge).score([g28])
    assert s.stats["verifier"] == "llm-judge" and s.stats["gate"] == "verified"
    assert s.stats["verified_answer"] == "11"
    np.testing.assert_array_equal(s.rewards, [1, 1, 0, 0, 0, 0, 0, 0])  # not the labels: no oracle
    assert "11" in judge.prompts[0]


def test_reference_verifier_without_reference_is_inconclusive():
    r = ReferenceVerifier().verify("What is 1+1?", "2")
    assert r.outcome == "inconclusive" and "reference" in r.reason
    assert ReferenceVerifier().verify_many([Claim("q", "1/2", "0.5")])[0].outcome == "verified"


@pytest.mark.parametrize("backend_mode, kind", [("generate", "generate"), ("logit", "verdict")])
def test_llm_judge_verifier_resolves_auto_mode_from_its_judge(backend_mode, kind):
    """``mode=auto`` (JudgeOptions' default) follows the judge's ``default_mode``: verdict logits for the
    embedded SmolLM2, the paper's written True/False for any other judge (before: auto always generated)."""
    from rewardkit.jury.proof_gate import LLMJudgeVerifier
    from rewardkit.testing import ScriptedJudge
    from rewardkit.verifier import Claim

    judge = ScriptedJudge(reply="It checks out.\nTrue", probs=[0.9, 0.1])
    judge.default_mode = backend_mode
    res = LLMJudgeVerifier(judge, mode="auto").verify_many([Claim("What is 2 + 2?", "4")])
    assert [k for k, _ in judge.batches] == [kind]
    assert res[0].verified, res[0].reason
