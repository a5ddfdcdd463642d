"""Verdict parsing: a regression table of judge outputs, last-verdict-wins properties and a fuzz test."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewardkit.types import Status
from rewardkit.verdicts import (
    PARSERS,
    boxed_contents,
    parse_answer_choice,
    parse_boxed_choice,
    parse_boxed_score,
    parse_yes_no,
)

# (parser, judge output, expected label or None for invalid); outputs written the way judges write them
TABLE = [
    (parse_boxed_choice, "Response A is right. Final verdict: $\\boxed{A}$", "A"),
    (parse_boxed_choice, "Both reach 420.\n\n\\boxed{Tie}", "Tie"),
    (parse_boxed_choice, "\\boxed{tie}", "Tie"),
    (parse_boxed_choice, "\\boxed{ B }", "B"),
    (parse_boxed_choice, "\\boxed{\\text{B}}", "B"),
    (parse_boxed_choice, "\\boxed {A}", "A"),
    (parse_boxed_choice, "At first \\boxed{A}, but on reflection \\boxed{B}", "B"),
    (parse_boxed_choice, "\\boxed{B} and the answer is \\boxed{420}", "B"),  # non-verdict boxes skipped
    (parse_boxed_choice, "Response A is better.", None),  # no box: never guessed from prose
    (parse_boxed_choice, "\\boxed{C}", None),
    (parse_boxed_choice, "\\boxed{A or B}", None),
    (parse_boxed_choice, "\\boxed{A", None),  # unclosed
    (parse_boxed_choice, "", None),
    (parse_boxed_score, "Minor slip in step 3. \\boxed{0.5}", "0.5"),
    (parse_boxed_score, "\\boxed{\\frac{1}{2}}", "0.5"),
    (parse_boxed_score, "\\boxed{1}", "1"),
    (parse_boxed_score, "\\boxed{1.0}", "1"),
    (parse_boxed_score, "\\boxed{0}", "0"),
    (parse_boxed_score, "wrong: \\boxed{0} ... actually fine \\boxed{1}", "1"),
    (parse_boxed_score, "\\boxed{0.7}", None),
    (parse_boxed_score, "score: 1", None),
    (parse_yes_no, "The slice is sound. **YES**", "YES"),
    (parse_yes_no, "**no**", "NO"),
    (parse_yes_no, "**YES** ... wait, step 2 divides by zero. **NO**", "NO"),
    (parse_yes_no, "**YES**NO**", "NO"),  # overlapping markup: the later verdict wins
    (parse_yes_no, "YES", None),
    (parse_yes_no, "**MAYBE**", None),
    (parse_answer_choice, "<think>Answer 1 looks off</think>Answer 2", "2"),
    (parse_answer_choice, "Both are equivalent, so: tie", "tie"),
    (parse_answer_choice, "I prefer Answer_1.", "1"),
    (parse_answer_choice, "Answer 2 ... no, Answer 1", "1"),
    (parse_answer_choice, "<think>Answer 1</think>no idea", None),  # only the part after </think> counts
    (parse_answer_choice, "Answer 12", None),
    (parse_answer_choice, "entire", None),  # "tie" inside a word is not a verdict
]


@pytest.mark.parametrize(("parser", "text", "label"), TABLE)
def test_regression_table(parser, text, label):
    v = parser(text)
    assert v.label == label
    assert v.status is (Status.OK if label is not None else Status.INVALID)
    if label is None:
        assert v.message and "no " in v.message  # says what was missing
    else:
        assert v.message is None


def test_invalid_is_never_a_tie_or_zero():
    for parser in PARSERS.values():
        v = parser("I cannot decide.")
        assert v.status is Status.INVALID and v.label is None and not v.ok


def test_nested_braces_balanced():
    assert boxed_contents("\\boxed{\\frac{1}{2}} x \\boxed{A}") == ["\\frac{1}{2}", "A"]
    assert boxed_contents("} \\boxed{{}} {") == ["{}"]


def test_adversarial_unclosed_boxes():
    """50k nested boxes (a quadratic scan would run for minutes) stay invalid; a later closed one wins."""
    text = "\\boxed{" * 50_000
    assert parse_boxed_choice(text).status is Status.INVALID
    assert parse_boxed_choice(text + "\\boxed{B}").label == "B"
    assert parse_boxed_score(text + "}" * 50_000).status is Status.INVALID


# ------------------------------------------------------------------------------------------ fuzz
TOKENS = [
    "\\boxed{", "\\boxed", "{", "}", "A", "B", "Tie", "tie", "C", "1", "0.5", "0", "1/2", "\\frac{1}{2}",
    "**", "YES", "NO", "yes", "Answer", "answer", " ", "\n", "_", ".", "$", "\\text{", "</think>", "<think>",
    "\\", "é", "\x00", "\U0001f600", "Answer 1", "Answer 2", "**YES**", "**NO**", "\\boxed{A}", "\\boxed{B}",
]
adversarial = st.lists(st.sampled_from(TOKENS), max_size=60).map("".join)
anything = st.one_of(st.text(max_size=400), adversarial)


def _check_verdict(v, allowed):
    assert v.status in (Status.OK, Status.INVALID)
    if v.status is Status.OK:
        assert v.label in allowed and v.message is None
    else:
        assert v.label is None and isinstance(v.message, str)


ALLOWED = {
    "ab_tie": {"A", "B", "Tie"},
    "score": {"1", "0.5", "0"},
    "yes_no": {"YES", "NO"},
    "answer_choice": {"1", "2", "tie"},
}


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(anything)
def test_fuzz_parsers_never_raise(text):
    for name, parser in PARSERS.items():
        _check_verdict(parser(text), ALLOWED[name])


@settings(max_examples=1500, deadline=None)
@given(anything, st.sampled_from(["A", "B", "Tie"]))
def test_fuzz_last_boxed_verdict_wins(text, choice):
    assert parse_boxed_choice(text + "\n\\boxed{" + choice + "}").label == choice


@settings(max_examples=1500, deadline=None)
@given(anything, st.sampled_from(["YES", "NO"]))
def test_fuzz_last_yes_no_wins(text, word):
    assert parse_yes_no(text + "\n**" + word + "**").label == word


@settings(max_examples=1500, deadline=None)
@given(anything, st.sampled_from(["Answer 1", "Answer 2", "tie"]))
def test_fuzz_last_answer_choice_wins(text, tail):
    expected = {"Answer 1": "1", "Answer 2": "2", "tie": "tie"}[tail]
    assert parse_answer_choice(text + "\n</think>\n" + tail).label == expected


@settings(max_examples=1500, deadline=None)
@given(anything)
def test_fuzz_boxed_contents_are_balanced(text):
    for c in boxed_contents(text):
        depth = 0
        for ch in c:
            depth += {"{": 1, "}": -1}.get(ch, 0)
            assert depth >= 0
        assert depth == 0
