import math

from rewardkit.answers import AnswerChecker
from rewardkit.scoring import get_scorer
from rewardkit.types import Group, Status
from rewardkit.verifier import VerifierScorer


def test_verifier_rewards_and_statuses():
    sc = VerifierScorer(checker=AnswerChecker())  # a fresh answer cache
    g1 = Group("g1", "1+1?", [r"\boxed{2}", r"it is \boxed{3}", "no answer given"], reference="2")
    g2 = Group("g2", "no ref", ["\\boxed{1}"])
    s1, s2 = sc.score([g1, g2])
    assert list(s1.rewards) == [1.0, 0.0, 0.0]
    assert s1.statuses == [Status.OK] * 3
    assert (s1.cost.verifier_calls, s1.cost.cache_hits) == (3, 0)
    (again,) = sc.score([g1])  # the two answers are now cached; "no answer" is decided again (not cached)
    assert (again.cost.verifier_calls, again.cost.cache_hits) == (1, 2)
    assert s1.extra["preds"] == ["2", "3", None]
    # a group without a reference abstains: masked, not a 0
    assert s2.statuses == [Status.ABSTAIN] and math.isnan(s2.rewards[0])
    assert s2.to_row()["rewards"] == [None]


def test_verifier_timeout_is_masked_not_zero():
    sc = get_scorer("verifier", timeout="0.0001", workers="1")
    (s,) = sc.score([Group("g", "p", [r"\boxed{\frac{1}{3}}"], reference="0.3333")])
    assert s.statuses == [Status.TIMEOUT]
    assert s.to_row()["rewards"] == [None]
    assert "exceeded" in s.messages[0]


def test_the_reference_verifier_takes_several_references_any_of_which_is_right():
    from rewardkit.verifier import Claim, ReferenceVerifier

    v = ReferenceVerifier()
    out = v.verify_many([Claim("Half of 1?", "0.5", ("1/2", "0.5")), Claim("Half of 1?", "2", ("1/2", "0.5")),
                         Claim("Half of 1?", "1/2", ["1/2"]), Claim("q", "1", None)])
    assert [r.outcome for r in out] == ["verified", "refuted", "verified", "inconclusive"]
    assert out[1].cost.verifier_calls + out[1].cost.cache_hits == 2  # checked against both references
