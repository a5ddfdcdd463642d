"""JURY-RL's plurality vote (Sec. 4.1) over answers clustered by equivalence (mutation-tested by
benchmarks/mutation.py); ResZero's use of it is in test_proof_gate.py."""

from __future__ import annotations

import numpy as np

from rewardkit.answers import AnswerChecker
from rewardkit.jury.vote import majority_vote, vote


def test_equivalent_answers_are_one_candidate_with_its_first_spelling():
    v, reps = majority_vote(["3", "1/2", "0.5", None, "\\frac{1}{2}", "3"])
    assert v.majority == 1 and v.counts == (3, 2)  # 1/2 = 0.5 = \frac{1}{2}: 3 votes, beating 3's 2
    assert reps == ["3", "1/2"]  # representative = first member of each cluster
    assert v.share == 3 / 6  # alpha over all G responses, the one without an answer included
    assert v.mask(1).tolist() == [False, True, True, False, True, False]


def test_no_answer_is_never_a_candidate():
    v = vote([None, None, "x"])
    assert v.majority == "x" and v.candidates == ("x",) and v.counts == (1,) and v.share == 1 / 3
    assert not v.mask(None).any()
    empty = vote([None])
    assert empty.majority is None and empty.share == 0.0 and empty.top(2) == ()


def test_ties_go_to_the_first_answer_to_appear():
    # App. A.2 edge case (i): 4 and 11 both have two votes; 4 appeared first
    v = vote(["4", "11", "11", "4", "7"])
    assert v.candidates == ("4", "11", "7") and v.counts == (2, 2, 1) and v.top(2) == ("4", "11")


def test_a_vote_with_no_answers_has_no_clusters_and_an_empty_mask():
    v, reps = majority_vote([None, None])
    assert v.majority is None and reps == []
    empty = vote([])
    assert np.arange(0)[empty.mask("x")].size == 0  # a boolean mask indexes even when there are no responses
    assert empty.mask("x").dtype == np.bool_


def test_the_given_checker_decides_equivalence():
    class Counting(AnswerChecker):
        """Counts its calls; otherwise the real checker."""

        calls = 0

        def check_many(self, pairs):
            Counting.calls += 1
            return super().check_many(pairs)

    checker = Counting(workers=1)
    try:
        v, reps = majority_vote(["0.5", "1/2"], checker=checker)
    finally:
        checker.close()
    assert Counting.calls > 0 and v.counts == (2,) and reps == ["0.5"]
