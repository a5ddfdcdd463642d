import json
import re
import sys
import threading
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardkit.answers import (
    AnswerChecker,
    Check,
    cluster_answers,
    equivalent,
    extract_answer,
    extract_answer_span,
    math_verify_equivalent,
    normalize_answer,
    plain_number,
    unfinished,
)
from rewardkit.types import Status

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize(
    "text, expected",
    [
        (r"so \boxed{\frac{1}{2}} is it", r"\frac{1}{2}"),
        (r"first \boxed{3} then corrected: \boxed{\sqrt{x^{2}+1}}", r"\sqrt{x^{2}+1}"),
        ("Thus the answer is 42.", "42"),
        ("The final answer is $x = 7$.\nDone", "x = 7"),
        ("we get 3 apples and then 1,250 pears", "1250"),
        ("no digits here at all", None),
        (r"The solutions are \boxed{(1,2)}, \boxed{(2,1)}.", "(1,2),(2,1)"),  # a run of boxes is one answer set
        (r"$\boxed{1}$ and $\boxed{2}$", "1,2"),
        (r"\boxed{3} and \boxed{3}", "3"),
        (r"\boxed{1}. Later: \boxed{2}", "2"),  # boxes in different sentences: the last one
        ("The answer is 0,5", "0.5"),  # an unambiguous decimal comma
        ("we get 3,14 in the end", "3.14"),
        # prose, no box: a single equation stays whole (math-verify compares it: -24/25 equals it), a chain
        # reads as its last side
        ("Therefore, $\\cos \\angle RPS = -\\frac{24}{25}$.", "\\cos \\angle RPS = -\\frac{24}{25}"),
        ("so $V = 20 \\times 2 = 40$.", "40"),
        ("So the area is $\\frac{3}{4}$ square units.", "\\frac{3}{4}"),
        ("costs $5 and then $6", "6"),  # unescaped dollars are not LaTeX when a number ends the text
        ("# Answer\n\n1+2\\sqrt{3}", "1+2\\sqrt{3}"),  # PRM800K's format
        ("", None),
        # what math-verify's default parse finds (issue 21): prose final answers without a box, bare decimals,
        # digit grouping, a bare fraction, "final answer is X. I hope" over earlier boxes, a set of boxes
        ("Final Answer: The volume of $ABCDEFGH$ is 120. I hope it is correct.", "120"),
        ("Final Answer: Jane started growing Sphere 3 hours ago. I hope it is correct.", "3"),
        (r"so \boxed{255} ... Final Answer: The final answer is $10,455$. I hope it is correct.", "10455"),
        ("The probability is .4", ".4"),
        ("The population is 1 000 people", "1000"),
        ("it is 0,111", "0.111"),
        (r"\frac{10}{9}", r"\frac{10}{9}"),
        ("$y=-\\frac{1}{2}x+\\frac{3}{4}$", "y=-\\frac{1}{2}x+\\frac{3}{4}"),  # an equation stays an equation
        (r"\[ \boxed{-2} \quad \text{and} \quad \boxed{1}. \]", "-2,1"),
        (r"$$\boxed{(3, 3)} \text{ for part (a) and } \boxed{(1, 1)}$$", "(3, 3),(1, 1)"),  # boxes of one environment
        ("$F_n = \\sum_{k=0}^{n-1} F_k$", "F_n = \\sum_{k=0}^{n-1} F_k"),  # "=" in braces is no equation side
        ("AZYUK2A", None),  # a digit inside a word is no number
        ("x^2 + 2*x + 1", "x^2 + 2*x + 1"),  # a response that is only mathematics is its own answer
    ],
)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize("text, cut, expected", [
    # issue 34: a response cut off mid-reasoning states no answer; its last number is a step of the reasoning
    ("6 * 7 could be 36. Adding 6 seven times gives 41. Then maybe it's 41 or", True, None),
    ("we get 41 +", True, None),
    ("so the value is 12, so", True, None),
    ("The answer is 41 or", True, None),
    ("<think>6 * 5 = 30 and 6 * 2 = 12, so 30 + 12 = 42. Now check with 7 * 6", True, None),
    # ... unless the answer stands before the cut, marked or in a finished sentence
    ("The answer is 42. Let me double-check: 6 * 7 = 30 +", True, "42"),
    (r"<think>six sevens are 42, so \boxed{42}", True, "42"),
    (r"\boxed{42}. Let me verify: 42 / 7 = 6 and", True, "42"),
    # finished responses keep math-verify's last resort
    ("There are 41 apples", False, "41"),
    ("Maybe it's 41 or 42.", False, "42"),
    ("so it is 41", False, "41"),
    ("A", False, "A"),
])
def test_unfinished_reasoning_yields_no_answer(text, cut, expected):
    assert (unfinished(text) is not None) == cut
    assert extract_answer(text) == expected


@pytest.mark.parametrize("text", [
    r"so \boxed{\frac{1}{2}} is it", "Final Answer: The largest $n$ is 34.", "The answer is 0,5", "we get 1,250 pears",
    r"The solutions are \boxed{(1,2)}, \boxed{(2,1)}.", "# Answer\n\n5", "$\\cos x = -\\frac{24}{25}$", "x^2+1",
])
def test_answer_span_points_at_the_answer(text):
    """``extract_answer_span`` says where the answer stands (the self-certainty baseline reads those tokens)."""
    start, end, answer = extract_answer_span(text)
    assert answer == extract_answer(text)
    def bare(x: str) -> str:  # digits and symbols only: "1,250" is 1250, "0,5" is 0.5, a set's boxes are joined
        return re.sub(r"[,.\s]", "", x).replace("}\\boxed{", "")

    assert bare(text[start:end]) == bare(answer)


@pytest.mark.parametrize(("written", "plain"), [
    (" $\\dfrac{3}{4}$ ", "\\frac{3}{4}"), ("\\tfrac{1}{2}", "\\frac{1}{2}"),  # math delimiters, fraction styles
    ("\\$15", "15"), ("\\15", "15"),  # an escaped dollar, and one whose "$" was lost
    ("5\\text{ }", "5"), ("\\text { }7", "7"), ("\\text{yes}", "yes"),  # empty and whole \text{}
    ("\\left( 1, 2 \\right)", "(1,2)"), ("x\\!+\\,1\\;\\quad", "x+1"), ("\\displaystyle 7", "7"),  # sizing, spacing
    ("42.", "42"), ("48^\\circ", "48"), ("48^{\\circ}", "48"),  # a full stop, degrees
])
def test_normalize_drops_each_presentation_form(written, plain):
    assert normalize_answer(written) == plain
    assert normalize_answer(None) is None


def test_plain_numbers_and_long_integers_are_read_exactly():
    """Integers (thousands grouped by ","), decimals of up to 6 places (math-verify's rounding), integer fractions;
    a zero denominator, a 7th decimal place or a decimal comma is no plain number; an integer past int()'s digit
    limit is compared by its digits (sign kept, "+" and leading zeros dropped)."""
    assert plain_number("1,234") == 1234 and plain_number("+7") == 7 and plain_number("-0.25") == Fraction(-1, 4)
    assert plain_number(".5") == Fraction(1, 2) and plain_number("0.123456") == Fraction(123456, 10**6)
    assert plain_number("-\\frac{3}{4}") == Fraction(-3, 4) and plain_number("6/8") == Fraction(3, 4)
    for no in ("0.1234567", "3/0", "\\frac{3}{0}", "", None, "2x", "0,111", "1" * 4001):
        assert plain_number(no) is None, no
    from rewardkit.answers import _long_int

    long = "1" * 4001
    assert _long_int(long) == long and _long_int("+" + long) == long and _long_int("-000" + long) == "-" + long
    assert _long_int("1," + ",".join(["111"] * 1400)) == "1" * 4201
    for no in ("123", "0" * 5000, "x", None, "1" * 4000):
        assert _long_int(no) is None, no


def test_normalize_strips_presentation_only():
    assert normalize_answer(r"\dfrac{3}{4}") == normalize_answer(r"\frac{3}{4}")
    assert normalize_answer(r"48^\circ") == normalize_answer("48")
    assert normalize_answer("12") != normalize_answer("21")


def test_equivalence_is_mathematical():
    assert equivalent("0.5", r"\frac{1}{2}") is True
    assert equivalent(r"\frac{1}{2}", "1/2") is True
    assert equivalent("3", "4") is False
    assert equivalent("3", None) is False


def test_a_gold_of_several_boxes_with_prose_between_reads_as_math_verify_reads_it():
    """math-verify's own cases (tests/test_open_thoughts.py): "\\boxed{1} no no no no no \\boxed{2}" is its final box
    (against {1, 2}: False), "\\boxed{1} papers and \\boxed{2} bins" the set. rewardkit wrapped every gold in one
    $...$, which made the set of the boxes of both (issue 29); a gold holding a box is now parsed as written."""
    from math_verify import parse

    for gold, read in [(r"\boxed{1} no no no no no \boxed{2}", "2"), (r"First \boxed{3}. Then the final answer is \boxed{5}", "5"),
                       (r"\boxed{1} papers and \boxed{2} bins", "{1, 2}")]:
        assert str(parse(gold)[0]) == read  # math-verify's own reading
        final = read.strip("{}").split(", ")[-1]
        assert equivalent(gold, final) is (read == final) and equivalent(gold, f"1,{final}") is (read != final), gold
    assert equivalent(r"\boxed{3}", "3") is True and equivalent(r"\boxed{\frac{1}{2}}", "0.5") is True


def test_clusters_merge_equivalent_answers():
    ids = cluster_answers(["1/2", "0.5", "3", None, r"\frac{1}{2}", "3.0"])
    assert ids[0] == ids[1] == ids[4]
    assert ids[2] == ids[5] != ids[0]
    assert ids[3] is None


def test_negative_fractions_keep_their_sign():
    # the exact fast path reads -\frac{a}{b} and -a/b as negative numbers: never equal to their absolute value
    assert plain_number(r"-\frac{3}{4}") == Fraction(-3, 4) and plain_number("-3/4") == Fraction(-3, 4)
    assert plain_number(r"+\frac{3}{4}") == Fraction(3, 4)
    assert equivalent(r"-\frac{1}{2}", "1/2") is False and equivalent(r"-\frac{1}{2}", "-0.5") is True
    assert cluster_answers([r"-\frac{1}{2}", "0.5", "-1/2"]) == [0, 1, 0]


def test_clusters_match_in_either_direction():
    # math-verify is asymmetric (gold first): x>2 as gold accepts the interval, the interval as gold refuses x>2
    assert equivalent("x>2", r"(2,\infty)") is True and equivalent(r"(2,\infty)", "x>2") is False
    # an answer joins a cluster when it matches the representative either way, whichever came first
    assert cluster_answers([r"(2,\infty)", "x>2"]) == [0, 0]
    assert cluster_answers(["x>2", r"(2,\infty)"]) == [0, 0]
    assert cluster_answers(["7", r"(2,\infty)", None, "x>2", "7"]) == [0, 1, None, 1, 0]


def test_checks_work_off_the_main_thread():
    # math-verify's own timeout uses SIGALRM, which raises off the main thread; ours must not.
    checker = AnswerChecker(workers=1)
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", checker.check_many([("2", "4/2"), ("2", "3")])))
    t.start()
    t.join(60)
    assert [c.equivalent for c in out["r"]] == [True, False]
    assert all(c.status is Status.OK for c in out["r"])
    checker.close()


def test_process_mode_checks_in_workers_and_reports_a_worker_that_died():
    """mode='process': pairs that need math-verify (no plain numbers) run in worker processes; a worker that died
    is an ERROR for its pair, naming the pair, and the next pair runs on a fresh worker."""
    checker = AnswerChecker(workers=1, mode="process")
    try:
        assert [c.equivalent for c in checker.check_many([("x+1", "1+x"), ("x+1", "x+2")])] == [True, False]
        assert checker.calls == 2
        (worker,) = checker._all
        worker.proc.kill()  # the idle worker dies
        worker.proc.wait()
        died, after = checker.check_many([("2x", "x*2"), ("2x", "x+x+1")])
        assert (died.equivalent, died.status) == (None, Status.ERROR)
        assert died.message.startswith("answer-check worker died on gold='2x' pred='x*2': ")
        assert (after.equivalent, after.status) == (False, Status.OK)
        assert len(checker._all) == 1 and checker._all[0] is not worker
    finally:
        checker.close()


@pytest.mark.parametrize("mode", ["inline", "process"])
def test_deadline_gives_timeout_status_and_recovers(mode):
    checker = AnswerChecker(timeout=1e-4, workers=1, mode=mode)
    res = checker.check(r"\frac{1}{3}", "0.3333")
    assert res.status is Status.TIMEOUT and res.equivalent is None
    assert "exceeded" in res.message and "on gold='\\\\frac{1}{3}' pred='0.3333'" in res.message
    checker.timeout = 30.0  # the next check runs normally (in process mode: on a replacement worker)
    assert checker.check(r"\frac{1}{3}", r"\frac{2}{6}").equivalent is True
    checker.close()


def test_inline_mode_refuses_other_threads():
    checker = AnswerChecker(mode="inline")
    errors = []

    def work():
        try:
            checker.check("x^2", "x*x")
        except RuntimeError as e:
            errors.append(str(e))

    t = threading.Thread(target=work)
    t.start()
    t.join(30)
    assert errors and "main thread" in errors[0]


def test_cache_hits_on_repeat():
    checker = AnswerChecker(workers=1)
    first = checker.check_many([("x+1", "1+x"), ("x+1", "1+x")])
    again = checker.check("x+1", "1+x")
    assert [c.equivalent for c in first] == [True, True]
    assert again.cached and again.equivalent is True
    assert checker.calls == 1
    checker.close()


def test_agreement_with_labels_on_shared_rollouts(rollouts_path):
    rows = [json.loads(line) for line in rollouts_path.open()]
    checker = AnswerChecker()
    pairs, labels, where = [], [], []
    for r in rows:
        for i, resp in enumerate(r["responses"]):
            pairs.append((r["answer"], extract_answer(resp)))
            labels.append(r["correct"][i])
            where.append((r["id"], i))
    res = checker.check_many(pairs)
    assert all(c.status is Status.OK for c in res)
    disagree = [(w, p[1]) for w, p, c, lab in zip(where, pairs, res, labels) if c.equivalent != lab]
    assert len(pairs) == 800
    assert 1 - len(disagree) / len(pairs) >= 0.99
    expected = json.loads((FIXTURES / "verifier_disagreements.json").read_text())
    assert sorted(disagree) == sorted(((d["id"], d["response"]), d["extracted"]) for d in expected)
    checker.close()


numbers = st.one_of(
    st.integers(-2000, 2000).map(str),
    st.integers(1000, 10**7).map(lambda n: f"{n:,}"),
    st.tuples(st.integers(-999, 999), st.integers(0, 999_999)).map(lambda t: f"{t[0]}.{t[1]:06d}".rstrip("0").rstrip(".") if t[1] else f"{t[0]}.5"),
    st.tuples(st.integers(0, 60), st.integers(1, 60)).map(lambda t: f"\\frac{{{t[0]}}}{{{t[1]}}}"),
    st.tuples(st.integers(-60, 60), st.integers(1, 60)).map(lambda t: f"{t[0]}/{t[1]}"),
    st.sampled_from(["0.5", "1/2", "0.333333", "1/3", "2/4", "1.0", "1", "-0.25", "-1/4", "3,250", "3250"]),
)


@settings(max_examples=300, deadline=None)
@given(numbers, numbers)
def test_plain_number_fast_path_agrees_with_math_verify(a, b):
    checker = AnswerChecker(mode="inline")
    fast = checker.check(a, b)
    assert fast.status is Status.OK
    assert fast.equivalent == math_verify_equivalent(a, b), (a, b, plain_number(a), plain_number(b))


def test_verifier_scorer_reports_unusable_references_and_huge_answers():
    """A garbage reference is an explicit error for its group (not 0 with status ok); a 5,000-digit answer
    gets a verdict instead of raising in int()."""
    from rewardkit.scoring import get_scorer
    from rewardkit.types import Group

    big = "9" * 5000
    bad, huge = get_scorer("verifier").score([
        Group(id="g", prompt="p", responses=["\\boxed{5}", "no answer"], reference="Infinity"),
        Group(id="h", prompt="p", responses=[f"\\boxed{{{big}}}", "\\boxed{9}"], reference=big),
    ])
    assert all(st is Status.ERROR for st in bad.statuses) and all("unusable reference" in m for m in bad.messages)
    assert huge.rewards.tolist() == [1.0, 0.0] and all(st is Status.OK for st in huge.statuses)


@pytest.mark.parametrize(("gold", "pred"), [
    ("\\[x+1\\]", "1+x"), ("\\(x+1\\) and more", "1+x"), ("$x$ is $3$", "3"),  # opens an environment: as written
    ("\\boxed{1} no no no \\boxed{2}", "2"),  # holds a box: math-verify's final box, not the set of both
])
def test_a_gold_that_opens_an_environment_or_holds_a_box_is_parsed_as_written(gold, pred):
    """Wrapped in one more $...$ each of these golds reads differently (a display or a set): they go to math-verify
    as written (issue 29), on a fresh checker so that no cached verdict answers."""
    assert AnswerChecker(mode="inline").check(gold, pred).equivalent is True


def test_an_unparseable_prediction_is_no_match():
    """math-verify parses a lone backslash to nothing and "}{" to its raw text: neither matches."""
    checker = AnswerChecker(mode="inline")
    assert checker.check("2", "\\") == Check(False) and checker.check("2", "}{") == Check(False)


def test_every_pair_of_a_batch_that_overruns_gets_its_timeout():
    """Process mode: after a pair overruns, its worker is replaced and the next pair of the same batch is checked."""
    checker = AnswerChecker(timeout=1e-4, workers=1, mode="process")
    try:
        res = checker.check_many([("x+1", "1+x"), ("x^2", "x*x")])
        assert [c.status for c in res] == [Status.TIMEOUT, Status.TIMEOUT]
    finally:
        checker.close()


def test_inline_checks_count_calls_and_report_a_failing_math_verify(monkeypatch):
    """``calls`` counts the math-verify checks run; an exception from math-verify is an ERROR naming the pair."""
    import rewardkit.answers as answers

    checker = AnswerChecker(mode="inline")
    checker.check_many([("x+1", "1+x"), ("x^2", "x*x")])
    assert checker.calls == 2

    def fails(gold, pred):
        raise ValueError("boom")

    monkeypatch.setattr(answers, "math_verify_equivalent", fails)
    res = checker.check("y+1", "1+y")
    assert (res.equivalent, res.status) == (None, Status.ERROR)
    assert res.message == "math-verify failed on gold='y+1' pred='1+y': ValueError('boom')"


@pytest.mark.parametrize(("gold", "pred"), [("1/3", "0.333333"), ("0.333333", "1/3"), ("\\frac{2}{3}", "0.666667"),
                                            ("0.666667", "\\frac{2}{3}"), ("3", "3.0"), ("2/4", "0.5")])
def test_a_rounded_decimal_equals_its_fraction_either_way(gold, pred):
    """math-verify compares a decimal with a non-terminating fraction after rounding to 6 places, so 0.333333 is 1/3
    (the exact fast path would say no): such pairs go to math-verify, gold first or second."""
    assert AnswerChecker(mode="inline").check(gold, pred).equivalent is True


def test_exactly_comparable_plain_numbers_skip_math_verify():
    """Integers, two decimals, two fractions, a decimal against an integer: compared exactly, no math-verify call."""
    checker = AnswerChecker(mode="inline")
    res = checker.check_many([("3", "3.0"), ("1/2", "2/4"), ("0.5", "0.50"), ("3.0", "3"), ("\\frac{1}{3}", "2/6"),
                              ("7", "8")])
    assert [c.equivalent for c in res] == [True, True, True, True, True, False] and checker.calls == 0


def test_a_missing_answer_is_false_with_its_reason_and_the_batch_goes_on():
    """A response without a final answer is a plain no-match that says why; the pairs after it are still checked."""
    checker = AnswerChecker(mode="inline")
    missing, after = checker.check_many([("1", None), ("1", "1.0")])
    assert missing == Check(False, message="no final answer found")
    assert after == Check(True)


_LONG = "3" * 4001  # past int()'s digit limit (see plain_number)


def test_every_fast_path_verdict_is_cached_and_counted():
    """Identical normalised strings, integers past int()'s limit and exactly comparable plain numbers are answered
    without math-verify; asked again, each comes from the cache (``cached``), and every repeat counts one hit."""
    checker = AnswerChecker(mode="inline")
    pairs = [(_LONG, "000" + _LONG), ("x^2+1", "$x^2 + 1$"), ("1/2", "2/4"), ("7", "8")]
    expected = [True, True, True, False]
    assert [c.equivalent for c in checker.check_many(pairs)] == expected
    assert checker.calls == 0 and checker.hits == 0
    for rep in (1, 2):
        again = checker.check_many(pairs)
        assert [(c.equivalent, c.cached) for c in again] == [(e, True) for e in expected]
        assert checker.hits == rep * len(pairs)
    assert checker.calls == 0


def test_a_long_integer_is_compared_by_its_digits_never_equal_to_a_short_number():
    """An integer past int()'s digit limit equals only the same digits (sign kept), never a short plain number
    either way round, and none of these pairs needs math-verify."""
    from rewardkit.answers import _long_int

    assert _long_int("-2" + "1" * 4000) == "-2" + "1" * 4000
    checker = AnswerChecker(mode="inline")
    pairs = [(_LONG, "5"), ("5", _LONG), ("-12" + _LONG, "-22" + _LONG), ("-12" + _LONG, "-012" + _LONG)]
    assert [c.equivalent for c in checker.check_many(pairs)] == [False, False, False, True]
    assert checker.calls == 0


def test_an_integer_of_4000_digits_is_still_a_plain_number():
    """int() reads up to 4,300 digits; plain_number reads integers up to 4,000 of them exactly."""
    assert plain_number("9" * 4000) == 10**4000 - 1


def test_a_letter_x_at_either_end_is_part_of_the_answer():
    """Only "$" signs and a final "." are stripped: "2X" is not 2, "$X$" is X."""
    assert normalize_answer("$X$") == "X" and normalize_answer("2X.") == "2X"
    assert AnswerChecker(mode="inline").check("2X", "2").equivalent is False


def test_math_verify_equivalent_leaves_the_callers_deadline_running():
    """math-verify's own timeouts (signal.alarm, cancelled with alarm(0) when it returns) are off, so the caller's
    SIGALRM deadline keeps running through a check (the inline mode relies on it)."""
    import signal

    def on_alarm(signum, frame):
        raise AssertionError("the test's deadline fired")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 1000.0)
    try:
        assert math_verify_equivalent("x+1", "1+x") is True
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert signal.getsignal(signal.SIGALRM) is on_alarm
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert 0 < left <= 1000.0


def test_process_mode_caches_worker_verdicts():
    """A verdict from a worker process is cached: asked again it is a hit, with the same value, and no new check."""
    checker = AnswerChecker(workers=1, mode="process")
    try:
        first = checker.check_many([("x+1", "1+x"), ("x+1", "x+2")])
        again = checker.check_many([("x+1", "1+x"), ("x+1", "x+2")])
        assert [c.equivalent for c in first] == [True, False]
        assert [(c.equivalent, c.cached) for c in again] == [(True, True), (False, True)]
        assert checker.calls == 2 and checker.hits == 2
    finally:
        checker.close()


def test_a_worker_whose_math_verify_raises_reports_an_error_naming_the_pair(tmp_path, monkeypatch):
    """A real worker process whose math-verify raises (here a broken install on its path) replies with the error;
    the pair gets an ERROR status naming it and the error, never False, and the worker is kept for the next pair."""
    import os

    broken = tmp_path / "math_verify"
    broken.mkdir()
    (broken / "__init__.py").write_text(
        "def parse(*args, **kwargs):\n    raise RuntimeError('parser broke')\n\n\n"
        "def verify(*args, **kwargs):\n    raise RuntimeError('verify broke')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), *sys.path]))
    checker = AnswerChecker(workers=1, mode="process")
    try:
        res = checker.check_many([("x+1", "1+x"), ("2x", "x*2")])
        assert res == [Check(None, Status.ERROR, "math-verify failed on gold='x+1' pred='1+x': RuntimeError('parser broke')"),
                       Check(None, Status.ERROR, "math-verify failed on gold='2x' pred='x*2': RuntimeError('parser broke')")]
        assert len(checker._all) == 1 and checker.calls == 0
        assert checker.check("x+1", "1+x").cached is False  # an error is not cached
    finally:
        checker.close()
