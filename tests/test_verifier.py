import math

import numpy as np
import pytest

from rewardkit.answers import AnswerChecker, Check, default_checker
from rewardkit.scoring import get_scorer
from rewardkit.types import Cost, Group, Status
from rewardkit.verifier import (
    BaseVerifier,
    Claim,
    ReferenceVerifier,
    VerifierOptions,
    VerifierScorer,
    VerifyResult,
    any_gold,
    check_against_references,
    make_checker,
    verify_all,
    verify_groups,
)


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
    v = ReferenceVerifier()
    out = v.verify_many([Claim("Half of 1?", "0.5", ("1/2", "0.5")), Claim("Half of 1?", "2", ("1/2", "0.5")),
                         Claim("Half of 1?", "1/2", ["1/2"]), Claim("q", "1", None)])
    assert [r.outcome for r in out] == ["verified", "refuted", "verified", "inconclusive"]
    assert out[1].cost.verifier_calls + out[1].cost.cache_hits == 2  # checked against both references


# ---------------------------------------------------------------- scripted checks (timeouts, crashes, cache)

RIGHT, WRONG = Check(True), Check(False)
HIT_RIGHT, HIT_WRONG = Check(True, cached=True), Check(False, cached=True)
SLOW = Check(None, Status.TIMEOUT, "math-verify exceeded 5s")
CRASH = Check(None, Status.ERROR, "math-verify failed: boom")
SILENT = Check(None)  # a check that reports no verdict and no reason


class ScriptedChecker:
    """An answer checker whose verdicts are scripted per (gold, prediction); it records every batched call."""

    def __init__(self, script: dict[tuple[str, str | None], Check]):
        self.script = script
        self.batches: list[list[tuple[str, str | None]]] = []

    def check_many(self, pairs):
        self.batches.append(list(pairs))
        return [self.script[p] for p in pairs]


class ShortChecker(ScriptedChecker):
    """A broken checker that answers one check fewer than it was asked."""

    def check_many(self, pairs):
        return super().check_many(pairs)[:-1]


def test_any_gold_one_matching_reference_makes_the_answer_right_wherever_it_stands():
    assert any_gold([WRONG, RIGHT]) is RIGHT
    assert any_gold([WRONG, SLOW, RIGHT]) is RIGHT
    assert any_gold([RIGHT, WRONG]) is RIGHT


def test_any_gold_an_unchecked_reference_keeps_a_wrong_answer_unknown():
    assert any_gold([WRONG, SLOW]) is SLOW  # not known wrong while the second reference is unchecked
    assert any_gold([WRONG, CRASH, SLOW]) is CRASH  # the first check that did not finish
    assert any_gold([WRONG, SILENT]) is SILENT  # no verdict is not a "no"
    assert any_gold([WRONG, HIT_WRONG]) is WRONG  # every reference checked: wrong


def test_checks_against_several_references_in_one_batch_with_their_cost():
    ch = ScriptedChecker({("1/2", "0.5"): WRONG, ("0.5", "0.5"): HIT_RIGHT, ("7", "3"): WRONG, ("8", "3"): SLOW})
    got = check_against_references(ch, [("a", "0.5", ("1/2", "0.5")), ("b", "3", ("7", "8")), ("c", "1", ())])
    assert ch.batches == [[("1/2", "0.5"), ("0.5", "0.5"), ("7", "3"), ("8", "3")]]
    assert got == {"a": (HIT_RIGHT, Cost(verifier_calls=1, cache_hits=1)),
                   "b": (SLOW, Cost(verifier_calls=2))}  # "c" has no reference: absent


def test_nothing_to_check_makes_no_checker_call():
    ch = ScriptedChecker({})
    assert check_against_references(ch, [("c", "1", ())]) == {}
    assert verify_groups([Group("g", "p", [r"\boxed{1}"])], ch) and ch.batches == []


def test_a_checker_that_answers_fewer_checks_than_asked_is_an_error_not_a_silent_zero():
    ch = ShortChecker({("2", "2"): RIGHT, ("2", "3"): RIGHT})
    with pytest.raises(ValueError):
        verify_groups([Group("g", "p", [r"\boxed{2}", r"\boxed{3}"], reference="2")], ch)


def test_verify_groups_every_group_in_order_with_its_statuses_messages_and_cost():
    ch = ScriptedChecker({("2", "2"): HIT_RIGHT, ("2", "3"): WRONG, ("2", None): Check(False, message="no final answer found"),
                          ("5", "5"): RIGHT, ("5", "6"): SLOW, ("5", "7"): CRASH, ("5", "8"): SILENT})
    groups = [Group("a", "p", [r"\boxed{2}", r"\boxed{3}", "I give up"], reference="2"),
              Group("none", "p", [r"\boxed{1}", "no answer"]),
              Group("b", "p", [r"\boxed{5}", r"\boxed{6}", r"\boxed{7}", r"\boxed{8}"], reference="5")]
    a, none, b = verify_groups(groups, ch)
    assert len(ch.batches) == 1  # one batched call for every group
    assert list(a.rewards) == [1.0, 0.0, 0.0] and a.statuses == [Status.OK] * 3
    assert a.messages == [None] * 3 and a.available is True and a.preds == ["2", "3", None]
    assert (a.cost.verifier_calls, a.cost.cache_hits) == (2, 1)
    # no reference: every response abstains, unavailable, its answers still read
    assert none.rewards.dtype == np.float64 and all(np.isnan(none.rewards))
    assert none.statuses == [Status.ABSTAIN] * 2 and none.available is False and none.preds == ["1", None]
    assert none.messages == ["group has no reference answer for the verifier"] * 2 and none.cost == Cost()
    # checks that did not finish: their status and reason, no reward; a silent one is an error
    assert b.rewards[:1].tolist() == [1.0] and all(np.isnan(b.rewards[1:]))
    assert b.statuses == [Status.OK, Status.TIMEOUT, Status.ERROR, Status.ERROR] and b.available is True
    assert b.messages == [None, "math-verify exceeded 5s", "math-verify failed: boom", "verifier did not finish"]
    assert (b.cost.verifier_calls, b.cost.cache_hits) == (4, 0)


def test_verify_groups_a_timeout_on_one_reference_is_not_read_as_wrong():
    ch = ScriptedChecker({("1/2", "2"): WRONG, ("0.5", "2"): SLOW, ("1/2", "0.5"): WRONG, ("0.5", "0.5"): RIGHT})
    (v,) = verify_groups([Group("g", "p", [r"\boxed{2}", r"\boxed{0.5}"], reference=["1/2", "0.5"])], ch)
    assert v.statuses == [Status.TIMEOUT, Status.OK] and np.isnan(v.rewards[0]) and v.rewards[1] == 1.0


def test_verify_groups_use_labels_only_when_asked_and_only_where_labels_exist():
    ch = ScriptedChecker({("2", "2"): RIGHT, ("2", "3"): WRONG})
    labelled = Group("l", "p", [r"\boxed{2}", r"\boxed{3}"], reference="2", labels=[False, True])  # labels disagree
    plain = Group("u", "p", [r"\boxed{3}"], reference="2")
    lab, unl = verify_groups([labelled, plain], ch, use_labels=True)
    assert lab.rewards.dtype == np.float64 and lab.rewards.tolist() == [0.0, 1.0]
    assert lab.statuses == [Status.OK] * 2 and lab.messages == [None] * 2 and lab.available is True
    assert lab.preds == [] and lab.cost == Cost()
    assert unl.rewards.tolist() == [0.0] and unl.preds == ["3"]  # no labels: checked
    assert ch.batches == [[("2", "3")]]
    (checked,) = verify_groups([labelled], ch)  # by default labels are not used
    assert checked.rewards.tolist() == [1.0, 0.0] and checked.preds == ["2", "3"]


# --------------------------------------------------------------------------------- the scorer and options


def test_verifier_scorer_fields():
    sc = VerifierScorer(checker=ScriptedChecker({("2", "2"): RIGHT, ("2", "3"): WRONG, ("4", "4"): SLOW}))
    ok, slow = sc.score([Group("g1", "p", [r"\boxed{2}", r"\boxed{3}"], reference="2"),
                         Group("g2", "p", [r"\boxed{4}"], reference="4")])
    assert ok.group_id == "g1" and slow.group_id == "g2"
    assert ok.components["verifier"].tolist() == [1.0, 0.0]
    assert ok.messages is None  # every check finished: no reasons to show
    assert slow.messages == ["math-verify exceeded 5s"] and slow.statuses == [Status.TIMEOUT]


@pytest.mark.parametrize(("fields", "message"), [
    ({"timeout": 0}, "option 'timeout': must be > 0, got 0"),
    ({"timeout": -1.0}, "option 'timeout': must be > 0, got -1.0"),
    ({"workers": 0}, "option 'workers': must be >= 1, got 0"),
])
def test_verifier_options_are_validated(fields, message):
    with pytest.raises(ValueError) as e:
        VerifierOptions(**fields)
    assert str(e.value) == message


def test_make_checker_shares_the_default_and_builds_others():
    mine = AnswerChecker()
    assert make_checker(checker=mine) is mine
    assert make_checker() is default_checker()
    assert make_checker(5.0, 2) is default_checker()
    other = make_checker(1.5, 3)
    assert other is not default_checker() and (other.timeout, other.workers) == (1.5, 3)
    assert make_checker(5.0, 3).workers == 3 and make_checker(6.0, 2).timeout == 6.0


# ----------------------------------------------------------------------------------- the reference verifier


def test_reference_verifier_outcomes_reasons_costs_and_cached_flag():
    ch = ScriptedChecker({("1/2", "0.5"): RIGHT, ("1/2", "2"): WRONG, ("1/2", "0.25"): HIT_WRONG,
                          ("1/2", "9"): SLOW, ("1/2", "8"): Check(None, Status.ERROR), ("1/2", "7"): SILENT,
                          ("1/2", "1/2"): HIT_RIGHT})
    out = ReferenceVerifier(ch).verify_many([Claim("q", a, "1/2") for a in ("0.5", "2", "0.25", "9", "8", "7", "1/2")]
                                            + [Claim("q", "1", None)])
    silent = out.pop(5)  # a check with no verdict (and no reason) is never a refutation
    assert (silent.outcome, silent.cost) == ("inconclusive", Cost(verifier_calls=1))
    assert out == [
        VerifyResult("verified", "equivalent to the reference answer", Cost(verifier_calls=1), False),
        VerifyResult("refuted", "differs from the reference answer", Cost(verifier_calls=1), False),
        VerifyResult("refuted", "differs from the reference answer", Cost(cache_hits=1), True),
        VerifyResult("inconclusive", "math-verify exceeded 5s", Cost(verifier_calls=1)),
        VerifyResult("inconclusive", "answer check error", Cost(verifier_calls=1)),
        VerifyResult("verified", "equivalent to the reference answer", Cost(cache_hits=1), True),
        VerifyResult("inconclusive", "no reference answer to check against", Cost()),
    ]
    assert out[0].cached is False and out[5].cached is True


def test_reference_verifier_real_checker_cache():
    v = ReferenceVerifier(AnswerChecker())
    first = v.verify("Half of 1?", r"\frac{1}{2}", reference="0.5")
    again = v.verify("Half of 1?", r"\frac{1}{2}", reference="0.5")
    assert (first.outcome, first.cached, first.cost) == ("verified", False, Cost(verifier_calls=1))
    assert (again.outcome, again.cached, again.cost) == ("verified", True, Cost(cache_hits=1))


def test_base_verifier_verify_passes_problem_answer_and_reference_through():
    class Recording(BaseVerifier):
        def __init__(self):
            self.claims: list[Claim] = []

        def verify_many(self, claims):
            self.claims += claims
            return [VerifyResult("inconclusive", f"seen {i}") for i, _ in enumerate(claims)]

    v = Recording()
    assert v.verify("What is 1+1?", "2", reference=("2", "two")).reason == "seen 0"
    assert v.verify("p", "a").reason == "seen 0"
    assert v.claims == [Claim("What is 1+1?", "2", ("2", "two")), Claim("p", "a", None)]


def test_verify_all_makes_one_call_checks_its_count_and_none_for_no_claim():
    class Counting(BaseVerifier):
        name = "counting"

        def __init__(self, drop: int = 0) -> None:
            self.calls: list[int] = []
            self.drop = drop

        def verify_many(self, claims):
            self.calls.append(len(claims))
            return [VerifyResult("verified") for _ in claims][: len(claims) - self.drop]

    v = Counting()
    assert verify_all(v, []) == [] and v.calls == []
    assert [r.outcome for r in verify_all(v, [Claim("p", "1"), Claim("p", "2")])] == ["verified"] * 2
    assert v.calls == [2]
    with pytest.raises(RuntimeError, match="verifier 'counting' returned 2 results for 3 claims"):
        verify_all(Counting(drop=1), [Claim("p", str(i)) for i in range(3)])

    class Unnamed(Counting):
        name = ""  # BaseVerifier's default

    class Plain:  # any object with verify_many is a verifier (no name attribute at all)
        def verify_many(self, claims):
            return []

    # a verifier without a name is named by its class
    with pytest.raises(RuntimeError, match="^verifier 'Unnamed' returned 2 results for 3 claims$"):
        verify_all(Unnamed(drop=1), [Claim("p", str(i)) for i in range(3)])
    with pytest.raises(RuntimeError, match="^verifier 'Plain' returned 0 results for 1 claims$"):
        verify_all(Plain(), [Claim("p", "1")])
