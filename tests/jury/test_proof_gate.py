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


# ------------------------------------------------- eq. 4 by hand: the default gate and the fallbacks


def test_gate_default_fallback_is_reszero_with_the_papers_c():
    """delta = 0 with no options: ResZero (eq. 5) with c = 0.01. App. B.2's group (4 a, 3 b, 1 c): alpha = 1/2,
    gamma = c * alpha^2 = 0.0025; majority: -c * alpha + gamma = -0.0025; b: alpha * (z - u_bar) = 1/12 (App. B.2,
    independent of c) + gamma; c: 0.5 * (0 - 0.5) + gamma = -0.2475."""
    r = proof_gate_rewards(["a"] * 4 + ["b"] * 3 + ["c"], None)
    np.testing.assert_allclose(r, [-0.0025] * 4 + [1 / 12 + 0.0025] * 3 + [-0.2475], rtol=0, atol=1e-15)
    # delta = 1 (eq. 4): exactly the responses with the certified answer get 1, whatever the fallback
    np.testing.assert_array_equal(proof_gate_rewards(list("abba"), "b", fallback="zero"), [0, 1, 1, 0])


def test_gate_random_fallback_defaults_to_seed_0_and_picks_a_real_candidate():
    """Without an rng the random fallback draws with Random(0), GateOptions.seed's default: the same pick on
    every call; the pick rewards exactly the responses of one candidate answer."""
    import random

    for labels in (list("aabbc"), list("abcd"), list("ab"), [None, "x", "y", "x"]):
        default = [proof_gate_rewards(labels, None, fallback="random").tolist() for _ in range(10)]
        assert default == [proof_gate_rewards(labels, None, fallback="random", rng=random.Random(0)).tolist()] * 10
        picked = {lab for lab, r in zip(labels, default[0], strict=True) if r == 1}
        assert len(picked) == 1 and None not in picked
        assert default[0] == [float(lab in picked) for lab in labels]


def test_gate_fallbacks_without_any_answer_give_zeros():
    for fallback in ("random", "mv", "zero", "reszero"):
        r = proof_gate_rewards([None, None, None], None, fallback=fallback)
        assert r.shape == (3,) and r.tolist() == [0.0, 0.0, 0.0]


# ------------------------------------------------------------------------- vote_groups / majority vote


def test_vote_groups_clusters_with_the_checker_it_is_given():
    from rewardkit.answers import AnswerChecker
    from rewardkit.jury.proof_gate import vote_groups

    checker = AnswerChecker()
    ((v, reps),) = vote_groups([Group("g", "p", ["\\boxed{1/2}", "\\boxed{3}", "\\boxed{0.5}"])], checker)
    assert v.counts == (2, 1) and reps == ["1/2", "3"]
    assert checker.calls > 0  # math-verify ran in this checker, not in the process-wide one


def test_majority_vote_scorer_uses_its_own_checker():
    """answer_timeout other than the default builds the scorer's own checker: the votes are clustered there."""
    from rewardkit.answers import default_checker
    from rewardkit.jury.proof_gate import MajorityVoteScorer

    s = MajorityVoteScorer(answer_timeout=3.0)
    (out,) = s.score([Group("g", "p", ["\\boxed{0.5}", "\\boxed{3}", "\\boxed{\\frac{1}{2}}"])])
    assert s.checker is not default_checker() and s.checker.calls > 0
    np.testing.assert_array_equal(out.rewards, [1, 0, 1])


def test_majority_vote_scorer_stats_by_hand():
    g = Group("mv-1", "p", ["\\boxed{2}", "\\boxed{3}", "\\boxed{2}", "I give up.", "\\boxed{5}"])
    empty = Group("mv-2", "p", ["I give up.", "no idea"])
    s, e = get_scorer("majority-vote").score([g, empty])
    assert (s.group_id, e.group_id) == ("mv-1", "mv-2")
    np.testing.assert_array_equal(s.rewards, [1, 0, 1, 0, 0])
    assert s.rewards.dtype == np.float64
    assert s.stats == {"majority_share": 2 / 5, "majority_answer": "2", "distinct_answers": 3}
    # no response has an answer: no majority, nothing rewarded, and the group is still scored (never masked)
    np.testing.assert_array_equal(e.rewards, [0, 0])
    assert e.statuses == [Status.OK, Status.OK]
    assert e.stats == {"majority_share": 0.0, "majority_answer": None, "distinct_answers": 0}


# ------------------------------------------------------------------------------ the proof-gate scorer


class _ByAnswer(BaseVerifier):
    """Test double: a scripted VerifyResult per claimed answer; records each batched call's answers."""

    name = "by-answer"

    def __init__(self, results):
        self.results, self.calls = results, []

    def verify_many(self, claims):
        self.calls.append([c.answer for c in claims])
        return [self.results[c.answer] for c in claims]


def _boxed(*answers) -> list[str]:
    return [f"\\boxed{{{a}}}" if a is not None else "I give up." for a in answers]


def test_proof_gate_scorer_stats_and_verifications_by_hand():
    ver = _ByAnswer({
        "2": VerifyResult("verified", "proof checked", Cost(verifier_calls=1)),
        "4": VerifyResult("refuted", "counterexample n = 3", Cost(verifier_calls=1), cached=True, detail={"status": "ok"}),
    })
    ok = Group("ok", "p", _boxed(2, 2, 3, None))
    # App. B.2's group: 4 x "4" (the refuted majority), 3 x "7", 1 x "9"
    refuted = Group("refuted", "p", _boxed(4, 4, 4, 4, 7, 7, 7, 9))
    none = Group("none", "p", _boxed(None, None))
    s, r, n = ProofGateScorer(verifier=ver, c=0.1).score([ok, refuted, none])
    assert ver.calls == [["2", "4"]]  # one batched call; a group without an answer has nothing to verify
    assert [x.group_id for x in (s, r, n)] == ["ok", "refuted", "none"]

    np.testing.assert_array_equal(s.rewards, [1, 1, 0, 0])
    assert s.stats == {"verifier": "by-answer", "gate": "verified", "fallback": None, "majority_share": 0.5,
                       "majority_answer": "2", "verified_answer": "2"}
    assert s.extra == {"verifications": [
        {"answer": "2", "outcome": "verified", "reason": "proof checked", "cached": False, "status": None}]}
    assert s.cost.verifier_calls == 1

    # refuted: ResZero with c = 0.1 on App. B.2's group (the worked example's rewards)
    np.testing.assert_allclose(r.rewards, [-0.025] * 4 + [0.025 + 1 / 12] * 3 + [-0.225], rtol=0, atol=1e-15)
    assert r.stats == {"verifier": "by-answer", "gate": "refuted", "fallback": "reszero", "majority_share": 0.5,
                       "majority_answer": "4", "verified_answer": None}
    assert r.extra["verifications"] == [
        {"answer": "4", "outcome": "refuted", "reason": "counterexample n = 3", "cached": True, "status": "ok"}]
    assert all(st is Status.OK for st in r.statuses)

    np.testing.assert_array_equal(n.rewards, [0, 0])
    assert n.stats == {"verifier": "by-answer", "gate": "inconclusive", "fallback": "reszero", "majority_share": 0.0,
                       "majority_answer": None, "verified_answer": None}
    assert n.extra == {"verifications": []} and n.cost.verifier_calls == 0


def test_proof_gate_top_k_rounds_by_hand():
    """Round k verifies the k-th most-voted answer of each group not yet verified that has one (App. G.3);
    the costs of a group's rounds add up; no round past the candidates, none once all are verified."""
    ver = _ByAnswer({
        "2": VerifyResult("refuted", "no", Cost(verifier_calls=1, seconds=1.5)),
        "3": VerifyResult("verified", "yes", Cost(verifier_calls=1, seconds=2.0)),
        "5": VerifyResult("verified", "yes", Cost(verifier_calls=1)),
        "8": VerifyResult("refuted", "no", Cost(verifier_calls=1)),
    })
    g0 = Group("g0", "p", _boxed(2, 2, 2, 3))  # majority refuted, runner-up verified in round 1
    g1 = Group("g1", "p", _boxed(5, 5, 6))  # verified in round 0: never verified again
    g2 = Group("g2", "p", _boxed(8, 8))  # one candidate: no round 1
    s0, s1, s2 = ProofGateScorer(verifier=ver, top_k=3, fallback="zero").score([g0, g1, g2])
    assert ver.calls == [["2", "5", "8"], ["3"]]
    np.testing.assert_array_equal(s0.rewards, [0, 0, 0, 1])
    assert (s0.stats["gate"], s0.stats["majority_answer"], s0.stats["verified_answer"]) == ("verified", "2", "3")
    assert [v["answer"] for v in s0.extra["verifications"]] == ["2", "3"]
    assert s0.cost.verifier_calls == 2 and s0.cost.seconds >= 3.5
    np.testing.assert_array_equal(s1.rewards, [1, 1, 0])
    assert s2.stats["gate"] == "refuted" and s2.stats["fallback"] == "zero"
    np.testing.assert_array_equal(s2.rewards, [0, 0])

    # every candidate refuted: as many rounds as candidates, then the fallback on the vote's majority
    ver2 = _ByAnswer({"2": VerifyResult("refuted"), "3": VerifyResult("refuted")})
    (s,) = ProofGateScorer(verifier=ver2, top_k=5, fallback="mv").score([Group("g", "p", _boxed(3, 2, 2))])
    assert ver2.calls == [["2"], ["3"]]
    np.testing.assert_array_equal(s.rewards, [0, 1, 1])
    assert [v["outcome"] for v in s.extra["verifications"]] == ["refuted", "refuted"]


def test_proof_gate_refuses_a_verifier_that_answers_too_few_claims():
    """A user's verifier that loses a result is an error naming it (``verifier.verify_all``), not a bare zip error."""
    class _Short(_ByAnswer):
        name = "short"

        def verify_many(self, claims):
            return super().verify_many(claims)[:-1]

    ver = _Short({"2": VerifyResult("verified"), "3": VerifyResult("verified")})
    with pytest.raises(RuntimeError, match="verifier 'short' returned 1 results for 2 claims"):
        ProofGateScorer(verifier=ver).score([Group("a", "p", _boxed(2)), Group("b", "p", _boxed(3))])


def test_proof_gate_random_fallback_follows_the_seed_option():
    """The random fallback (Table 3) draws from the scorer's seeded stream: across seeds each candidate is
    picked, and only candidates; the same seed gives the same picks; one stream runs across a batch's groups."""
    refute = _ByAnswer({"1": VerifyResult("refuted")})
    g = Group("g", "p", _boxed(1, 1, 2, 3))
    picks = set()
    for seed in range(12):
        (s,) = ProofGateScorer(verifier=refute, fallback="random", seed=seed).score([g])
        picks.add(tuple(s.rewards.tolist()))
    assert picks == {(1, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1)}
    batch = [Group(f"g{i}", "p", _boxed(1, 1, 2, 3)) for i in range(12)]
    a = [tuple(s.rewards) for s in ProofGateScorer(verifier=refute, fallback="random", seed=3).score(batch)]
    b = [tuple(s.rewards) for s in ProofGateScorer(verifier=refute, fallback="random", seed=3).score(batch)]
    assert a == b and len(set(a)) > 1


# ------------------------------------------------------------------------------ the LLM judge (App. D)

APP_D_PROMPT = ("You are a professional math QA pair evaluator. Your sole task is to determine whether a given "
                "mathematical question and answer are correctly matched. First explain your reasoning, then end your "
                "response with your final judgment: True or False.")


def _by_answer(table):
    """A ScriptedJudge function answering from the claim's answer (the user message ends "Answer: X")."""
    return lambda prompt, *choices: table[prompt.rsplit("Answer: ", 1)[1]]


def test_llm_judge_messages_are_the_app_d_prompt():
    from rewardkit.jury.proof_gate import LLMJudgeVerifier
    from rewardkit.testing import ScriptedJudge

    v = LLMJudgeVerifier(ScriptedJudge(reply="True"), mode="generate")
    assert v.messages(Claim("  What is 2 + 2?\n", " 4 ")) == [
        {"role": "system", "content": APP_D_PROMPT}, {"role": "user", "content": "Question: What is 2 + 2?\nAnswer: 4"}]


def test_llm_judge_logit_mode_by_hand():
    """p(True) >= 0.5 after "Final judgment: " verifies, below refutes; a failed request is inconclusive with its
    status; a cached verdict costs a cache hit, not a call."""
    from rewardkit.backends.base import VerdictResult
    from rewardkit.jury.proof_gate import LLMJudgeVerifier
    from rewardkit.testing import ScriptedJudge

    judge = ScriptedJudge(probs=_by_answer({
        "7": Status.TIMEOUT, "4": [0.9, 0.1], "5": [0.2, 0.8], "6": [0.5, 0.5],
        "8": VerdictResult(np.array([0.3, 0.7]), cached=True)}))
    v = LLMJudgeVerifier(judge, mode="logit")
    claims = [Claim("What is 2 + 2?", a) for a in ("7", "4", "5", "6", "8")]
    timeout, right, wrong, even, cached = v.verify_many(claims)
    assert judge.batches == [("verdict", 5)]
    for req, c in zip(judge.requests, claims, strict=True):
        assert (tuple(req.choices), req.assistant_prefix) == (("True", "False"), "Final judgment: ")
        assert req.messages == v.messages(c)

    assert (timeout.outcome, timeout.reason, timeout.detail) == ("inconclusive", "judge timeout: scripted timeout",
                                                                  {"status": "timeout"})
    assert timeout.cost == Cost(judge_calls=1) and timeout.cached is False
    assert (right.outcome, right.reason, right.detail) == ("verified", "p(True) = 0.900", {"p_true": 0.9})
    assert right.cost == Cost(judge_calls=1, prompt_tokens=10) and right.cached is False
    assert (wrong.outcome, wrong.reason, wrong.detail) == ("refuted", "p(True) = 0.200", {"p_true": 0.2})
    assert (even.outcome, even.reason) == ("verified", "p(True) = 0.500")
    assert (cached.outcome, cached.reason, cached.cached) == ("refuted", "p(True) = 0.300", True)
    assert cached.cost == Cost(cache_hits=1)
    assert v.verify_many([]) == [] and judge.batches == [("verdict", 5)]  # nothing to judge: no call


def test_llm_judge_generate_mode_by_hand():
    """The written True / False (App. D): a failed request or an unreadable judgment is inconclusive with its
    status and reason, and the judgments after it in the batch are still read."""
    from rewardkit.backends.base import Completion
    from rewardkit.jury.proof_gate import LLMJudgeVerifier
    from rewardkit.testing import ScriptedJudge

    judge = ScriptedJudge(reply=_by_answer({
        "7": Status.TIMEOUT,
        "6": "I cannot tell from here.",
        "8": Completion(["2 + 2 is 4. Final judgment: True"], finish_reasons=["length"], prompt_tokens=10,
                        completion_tokens=512),
        "4": "2 + 2 = 4, so the pair matches.\nFinal judgment: True",
        "5": "2 + 2 = 4, not 5.\nFinal judgment: False",
        "9": Completion(["Final judgment: False"], cached=True)}))
    v = LLMJudgeVerifier(judge, mode="generate")
    failed, unread, cut, right, wrong, cached = v.verify_many(
        [Claim("What is 2 + 2?", a) for a in ("7", "6", "8", "4", "5", "9")])
    assert judge.generate_batches == [6]

    assert (failed.outcome, failed.reason, failed.detail) == ("inconclusive", "judge timeout: scripted timeout",
                                                              {"status": "timeout"})
    assert failed.cost == Cost(judge_calls=1) and failed.cached is False
    assert (unread.outcome, unread.detail) == ("inconclusive", {"status": "invalid"})
    assert unread.reason.startswith("no True/False verdict") and "I cannot tell from here." in unread.reason
    assert unread.cost == Cost(judge_calls=1, prompt_tokens=10, completion_tokens=5)
    # a judgment cut off at max_tokens is no verdict, even where its last word reads True
    assert (cut.outcome, cut.detail) == ("inconclusive", {"status": "invalid"})
    assert "finish_reason='length'" in cut.reason
    assert (right.outcome, right.reason, right.detail) == ("verified", "judge: 1 True / 0 False", {"judgments": ["True"]})
    assert right.cost == Cost(judge_calls=1, prompt_tokens=10, completion_tokens=5) and right.cached is False
    assert (wrong.outcome, wrong.reason, wrong.detail) == ("refuted", "judge: 0 True / 1 False", {"judgments": ["False"]})
    assert (cached.outcome, cached.cached, cached.cost) == ("refuted", True, Cost(cache_hits=1))


@pytest.mark.parametrize("texts, outcome, reason, judgments", [
    (["Yes.\nTrue", "Right.\nTrue", "unsure", "No.\nFalse"], "verified", "judge: 2 True / 1 False",
     ["True", "True", "False"]),
    (["True", "False", "Final judgment: True", "Final judgment: False"], "inconclusive", "judge: 2 True / 2 False",
     ["True", "False", "True", "False"]),
    (["False", "hmm", "Final judgment: False", "True"], "refuted", "judge: 1 True / 2 False", ["False", "False", "True"]),
])
def test_llm_judge_samples_majority(texts, outcome, reason, judgments):
    """samples > 1 (the paper's MV@4 judge): the majority of the readable judgments; a tie is inconclusive
    (no status: the judge answered, it did not fail)."""
    from rewardkit.jury.proof_gate import LLMJudgeVerifier
    from rewardkit.testing import ScriptedJudge

    (res,) = LLMJudgeVerifier(ScriptedJudge(reply=lambda p: texts), samples=4, mode="generate").verify_many(
        [Claim("q", "1")])
    assert (res.outcome, res.reason) == (outcome, reason)
    assert res.detail == {"judgments": judgments}
    assert res.cost == Cost(judge_calls=1, prompt_tokens=10, completion_tokens=20)


def test_llm_judge_no_readable_sample_reports_the_first():
    from rewardkit.jury.proof_gate import LLMJudgeVerifier
    from rewardkit.testing import ScriptedJudge

    judge = ScriptedJudge(reply=lambda p: ["first unsure reply", "second unsure reply"])
    (res,) = LLMJudgeVerifier(judge, samples=2, mode="generate").verify_many([Claim("q", "1")])
    assert (res.outcome, res.detail) == ("inconclusive", {"status": "invalid"})
    assert "first unsure reply" in res.reason and "second" not in res.reason


@pytest.mark.parametrize("samples, temperature, sent", [(1, 0.0, 0.0), (1, 0.3, 0.3), (4, 0.0, 0.7), (4, 1.0, 1.0)])
def test_llm_judge_request_settings(samples, temperature, sent):
    """One request per claim with n = samples and max_tokens; several samples are drawn at temperature >= 0.7
    (identical greedy samples would make the majority meaningless); one sample keeps the temperature given."""
    from rewardkit.jury.proof_gate import LLMJudgeVerifier
    from rewardkit.testing import ScriptedJudge

    judge = ScriptedJudge(reply="True")
    LLMJudgeVerifier(judge, mode="generate", samples=samples, temperature=temperature, max_tokens=300).verify_many(
        [Claim("q", "1"), Claim("q", "2")])
    assert [(r.n, r.max_tokens, r.temperature) for r in judge.requests] == [(samples, 300, sent)] * 2


def test_llm_judge_scorer_masks_a_failed_judgment_only():
    """App. D baseline: a judgment that failed masks its group with the failure's status and reason (never a
    silent 0); a refuted group gets the fallback (zero); a verified one its reward, even after a failed round."""
    from rewardkit.jury.proof_gate import LLMJudgeScorer
    from rewardkit.testing import ScriptedJudge

    judge = ScriptedJudge(reply=_by_answer({
        "2": Status.TIMEOUT, "4": "Final judgment: False", "6": "Final judgment: True",
        "8": Status.ERROR, "9": "Final judgment: True"}))
    groups = [Group("fail", "p", _boxed(2, 2, 3)), Group("no", "p", _boxed(4, 4, 5)),
              Group("yes", "p", _boxed(6, 6, 7)), Group("late", "p", _boxed(8, 8, 9))]
    fail, no, yes, late = LLMJudgeScorer(judge=judge, mode="generate", top_k=1).score(groups)
    assert [s.group_id for s in (fail, no, yes, late)] == ["fail", "no", "yes", "late"]
    assert fail.statuses == [Status.TIMEOUT] * 3 and np.isnan(fail.rewards).all()
    assert fail.messages == ["judge timeout: scripted timeout"] * 3
    assert fail.stats == {"verifier": "llm-judge"}
    assert fail.extra == {"verifications": [{"answer": "2", "outcome": "inconclusive",
                                             "reason": "judge timeout: scripted timeout", "cached": False,
                                             "status": "timeout"}]}
    assert fail.cost.judge_calls == 1
    assert no.statuses == [Status.OK] * 3 and no.stats["gate"] == "refuted" and no.stats["fallback"] == "zero"
    np.testing.assert_array_equal(no.rewards, [0, 0, 0])
    np.testing.assert_array_equal(yes.rewards, [1, 1, 0])
    assert late.statuses == [Status.ERROR] * 3

    # top-2: the majority's judgment failed, the runner-up's verified it: the group is scored, not masked
    (late2,) = LLMJudgeScorer(judge=judge, mode="generate", top_k=2).score([groups[3]])
    assert late2.statuses == [Status.OK] * 3 and late2.stats["verified_answer"] == "9"
    np.testing.assert_array_equal(late2.rewards, [0, 0, 1])
    assert [v["status"] for v in late2.extra["verifications"]] == ["error", None]
    assert late2.cost.judge_calls == 2


def test_llm_judge_scorer_status_ok_is_no_failure():
    """A verification whose detail says status "ok" is an answered judgment: a refuted one gets the fallback."""
    from rewardkit.jury.proof_gate import LLMJudgeScorer
    from rewardkit.testing import ScriptedJudge

    class _Scorer(LLMJudgeScorer):
        def _verifier(self):
            return _ByAnswer({"2": VerifyResult("refuted", "wrong", detail={"status": "ok"})})

    (s,) = _Scorer(judge=ScriptedJudge(reply="True"), mode="generate").score([Group("g", "p", _boxed(2, 2, 3))])
    assert s.statuses == [Status.OK] * 3 and s.stats["gate"] == "refuted"
    np.testing.assert_array_equal(s.rewards, [0, 0, 0])


def test_llm_judge_reply_without_any_text_is_an_invalid_judgment():
    """A backend that answers ok with no text at all (an HTTP reply with an empty "choices" list) gives no
    judgment: inconclusive, status invalid, read as an empty output as the other judge scorers read it
    (it raised IndexError and failed the whole batch)."""
    from rewardkit.jury.proof_gate import LLMJudgeScorer, LLMJudgeVerifier
    from rewardkit.testing import ScriptedJudge

    judge = ScriptedJudge(reply=_by_answer({"1": [], "2": "Final judgment: True"}))
    empty, right = LLMJudgeVerifier(judge, mode="generate").verify_many([Claim("q", "1"), Claim("q", "2")])
    assert (empty.outcome, empty.detail) == ("inconclusive", {"status": "invalid"})
    assert empty.reason.startswith("no True/False verdict") and "<empty>" in empty.reason
    assert right.outcome == "verified"
    (s,) = LLMJudgeScorer(judge=judge, mode="generate").score([Group("g", "p", _boxed(1, 1, 2))])
    assert s.statuses == [Status.INVALID] * 3 and "<empty>" in s.messages[0]
