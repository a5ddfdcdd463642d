"""Verdict parsing: regression tables (hand-written and real judge outputs), where-the-prompt-asks properties,
conflict/echo/negation properties and a fuzz test."""

from __future__ import annotations

import json
from pathlib import Path

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
    parse_consistency,
    parse_true_false,
    parse_yes_no,
)

FIXTURE = Path(__file__).parent / "fixtures" / "judge_outputs.json"

# (parser, judge output, expected label or None for invalid); outputs written the way judges write them
TABLE = [
    (parse_boxed_choice, "Response A is right. Final verdict: $\\boxed{A}$", "A"),
    (parse_boxed_choice, "Both reach 420.\n\n\\boxed{Tie}", "Tie"),
    (parse_boxed_choice, "\\boxed{tie}", "Tie"),
    (parse_boxed_choice, "\\boxed{ B }", "B"),
    (parse_boxed_choice, "\\boxed{\\text{B}}", "B"),
    (parse_boxed_choice, "\\boxed {A}", "A"),
    (parse_boxed_choice, "At first \\boxed{A}. On reflection, \\boxed{B}", "B"),
    (parse_boxed_choice, "At first \\boxed{A}, but on reflection \\boxed{B}", None),  # one sentence, two verdicts
    (parse_boxed_choice, "definitely not \\boxed{B}", None),  # used to read as B
    (parse_boxed_choice, "A is right, so not $\\boxed{B}$", None),
    (parse_boxed_choice, "\\boxed{B} is wrong", None),
    (parse_boxed_choice, "must end with exactly one of: \\boxed{A}, \\boxed{B}, or \\boxed{Tie}.", None),  # echo
    (parse_boxed_choice, "\\boxed{A}\\boxed{B}", None),
    (parse_boxed_choice, "one of \\boxed{A}, \\boxed{B}, or \\boxed{Tie}.\n\nA errs in step 2. \\boxed{B}", "B"),
    (parse_boxed_choice, "A is right, B is not. \\boxed{A}", "A"),  # a negation in another sentence
    (parse_boxed_choice, "<think>\\boxed{A}</think>Final verdict: \\boxed{B}", "B"),
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
    (parse_boxed_score, "Score it as \\boxed{1}, \\boxed{0.5}, or \\boxed{0}", None),  # echo: never the last, 0
    (parse_boxed_score, "the final overall score should be: \\boxed{0.5}", "0.5"),  # RLAIF rubric ending
    (parse_true_false, "Final judgment: False.", "False"),  # JURY-RL App. D example
    (parse_true_false, "This value does not match 1152. Therefore, the given answer is incorrect.\n\nFinal judgment: False.",
     "False"),
    (parse_true_false, "so it is true... Final judgment: False.", "False"),  # read after the label
    (parse_true_false, "It is not true.", None),  # used to read as True
    (parse_true_false, "True or False", None),  # echo: never the last, False
    (parse_true_false, "The answer matches the question, so: True", "True"),
    (parse_true_false, "False\n\nExplanation: the sum is 12.", None),  # the verdict must end the response
    (parse_true_false, "no idea", None),
    (parse_consistency, "<comments>...</comments>\n<consistency>Incorrect</consistency>", "Incorrect"),
    (parse_consistency, "x <consistency>[Correct]</consistency>", "Correct"),
    (parse_consistency, "The statement is not exact.\n<consistency>Incorrect</consistency>", "Incorrect"),
    (parse_consistency, "<consistency>[Correct/Incorrect]</consistency>", None),  # echo of the format
    (parse_consistency, "<consistency>Correct</consistency> or <consistency>Incorrect</consistency>", None),
    (parse_consistency, "<think><consistency>Correct</consistency></think><consistency>Incorrect</consistency>",
     "Incorrect"),
    (parse_consistency, "Correct", None),
    (parse_boxed_score, "score: 1", None),
    (parse_yes_no, "The slice is sound. **YES**", "YES"),
    (parse_yes_no, "**no**", "NO"),
    # GAR App. B puts the verdict first, then the explanation (which may name the other word)
    (parse_yes_no, "**YES** ... no reason to answer **NO**", "YES"),
    (parse_yes_no, "**YES**, since there is no reason to answer **NO**", None),  # one sentence, both words
    (parse_yes_no, "**YES** ... wait, step 2 divides by zero. **NO**", "YES"),
    (parse_yes_no, "Step 2 divides by zero.\n\n**NO**\n\nThe division is invalid, so **YES** is wrong.", "NO"),
    (parse_yes_no, "<p><b>**YES**</b></p> <p>The thinking process enumerates all permutations</p>", "YES"),  # App. B
    (parse_yes_no, "**YES**NO**", None),  # overlapping markup holds both words
    (parse_yes_no, "I will answer **YES** or **NO**.", None),  # echo of the instructions
    (parse_yes_no, "**YES**/**NO**", None),
    (parse_yes_no, "The step is not **YES**", None),  # negated
    (parse_yes_no, "<think>**NO**</think>**YES**", "YES"),
    (parse_yes_no, "YES", None),
    (parse_yes_no, "**MAYBE**", None),
    (parse_answer_choice, "<think>Answer 1 looks off</think>Answer 2", "2"),
    (parse_answer_choice, "Both are equivalent, so: tie", "tie"),
    (parse_answer_choice, "I prefer Answer_1.", "1"),
    (parse_answer_choice, "Answer 2 ... no, Answer 1", None),  # two verdicts on the verdict line
    (parse_answer_choice, "Answer 1 is better than Answer 2.", None),  # used to read as 2
    (parse_answer_choice, "Answer 2 (they do not tie)", None),  # used to read as tie
    (parse_answer_choice, "Answer 2 wins; it is not a tie.", None),  # used to read as tie
    (parse_answer_choice, "definitely not Answer 2", None),
    (parse_answer_choice, "Answer 1 is not correct.", None),
    (parse_answer_choice, "Answer 1 is correct.\nAnswer 2 is incorrect.\n</think>\n Answer 1", "1"),  # App. E
    (parse_answer_choice, "Answer 1 is wrong\n\nAnswer 2", "2"),  # earlier lines are reasoning
    (parse_answer_choice, "Answer 1\n\nNote: Answer 2 has an arithmetic slip.", None),  # last line is not a verdict
    (parse_answer_choice, "Final Judgment (1, 2 or tie): Answer 2", "2"),  # a label line holding an echo
    (parse_answer_choice, '"Answer 1" if the first answer is better, "Answer 2" if the second, or "tie"', None),
    (parse_answer_choice, "Both are correct, neither is better. tie", "tie"),
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
        assert v.message and any(w in v.message for w in ("no ", "conflicting", "negated", "neither begins"))  # says why
    else:
        assert v.message is None


def _fixture_rows():
    return json.loads(FIXTURE.read_text())["outputs"]


@pytest.mark.parametrize("row", _fixture_rows(), ids=lambda r: r["id"])
def test_real_judge_outputs(row):
    """Raw SmolLM2 judge outputs (benchmarks/judge_outputs.py) with hand-checked verdicts."""
    v = PARSERS[row["parser"]](row["text"])
    assert v.label == row["expected"], row["why"]
    assert v.ok is (row["expected"] is not None)


def test_real_judge_outputs_cover_every_parser():
    rows = _fixture_rows()
    assert {r["parser"] for r in rows} == set(PARSERS)
    assert all(r["why"] for r in rows if r["expected"] is None)  # every invalid row says why


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
    "True", "false", "not ", " or ", ", ", "Final judgment:", "<consistency>", "</consistency>", "Correct",
    "Incorrect", "<consistency>Correct</consistency>", "\r\n",
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
    "true_false": {"True", "False"},
    "consistency": {"Correct", "Incorrect"},
}


def test_every_parser_is_fuzzed():
    assert set(PARSERS) == set(ALLOWED)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(anything)
def test_fuzz_parsers_never_raise(text):
    for name, parser in PARSERS.items():
        _check_verdict(parser(text), ALLOWED[name])


def _without(text: str, *parts: str) -> str:
    """``text`` with every occurrence of ``parts`` gone (repeated, since removal can join new ones)."""
    while any(p in text for p in parts):
        for p in parts:
            text = text.replace(p, "")
    return text


# one line of filler: no line breaks, no label colon, no verdict words
line_filler = st.text(st.characters(blacklist_categories=("Cc", "Zl", "Zp", "Cs"), blacklist_characters=":\x1c\x1d\x1e\x85"),
                      max_size=30).map(lambda t: " " + _without(t, "answer", "Answer", "tie", "true", "false") + " ")
joiner = st.sampled_from(["", " ", ", ", " or ", ", or ", "/", " and ", "\n", " | ", "$ or $", ". "])
negation = st.sampled_from(["not ", "definitely not ", "It is not ", "never ", "certainly isn't "])

BOXED = {"ab_tie": (parse_boxed_choice, ["A", "B", "Tie"]), "score": (parse_boxed_score, ["1", "0.5", "0"])}
LINE = {"answer_choice": (parse_answer_choice, ["Answer 1", "Answer 2", "tie"]),
        "true_false": (parse_true_false, ["True", "False"])}


# ------------------------------------------------- the verdict where the prompt asks for it is read
@settings(max_examples=200, deadline=None)
@given(anything, st.sampled_from(["A", "B", "Tie"]))
def test_final_boxed_verdict_is_read(text, choice):
    assert parse_boxed_choice(text + "\n\nFinal verdict: \\boxed{" + choice + "}").label == choice


@settings(max_examples=200, deadline=None)
@given(anything, st.sampled_from(["1", "0.5", "0"]))
def test_final_boxed_score_is_read(text, score):
    assert parse_boxed_score(text + "\n\nthe final overall score should be: \\boxed{" + score + "}").label == score


@settings(max_examples=200, deadline=None)
@given(anything, st.sampled_from(["YES", "NO"]))
def test_first_yes_no_is_read(text, word):
    """GAR puts the verdict before the explanation: whatever the explanation says, the first verdict counts."""
    assert parse_yes_no("The step is short.\n**" + word + "**\n\nExplanation: " + _without(text, "</think>")).label == word


@settings(max_examples=200, deadline=None)
@given(anything, st.sampled_from(["Answer 1", "Answer 2", "tie"]))
def test_answer_choice_after_think_is_read(text, tail):
    expected = {"Answer 1": "1", "Answer 2": "2", "tie": "tie"}[tail]
    assert parse_answer_choice(text + "\n</think>\n" + tail).label == expected


@settings(max_examples=200, deadline=None)
@given(anything, st.sampled_from(["True", "False"]))
def test_final_judgment_is_read(text, word):
    assert parse_true_false(text + "\nFinal judgment: " + word + ".").label == word


@settings(max_examples=200, deadline=None)
@given(anything, st.sampled_from(["Correct", "Incorrect"]))
def test_consistency_tag_is_read(text, word):
    body = _without(text, "</think>", "<consistency>")
    assert parse_consistency(body + "<consistency>" + word + "</consistency>").label == word


# ----------------------------------------- conflicting, echoed or negated verdicts are never definite
@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(BOXED)), anything, st.data(), joiner, st.text(max_size=40))
def test_conflicting_final_boxes_are_invalid(name, prefix, data, join, suffix):
    parser, choices = BOXED[name]
    x, y = data.draw(st.permutations(choices))[:2]
    text = prefix + "\n" + f"\\boxed{{{x}}}{join}\\boxed{{{y}}}" + _without(suffix, "\\boxed")
    assert parser(text).status is Status.INVALID


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(BOXED)), anything, st.data(), negation)
def test_negated_final_box_is_invalid(name, prefix, data, neg):
    parser, choices = BOXED[name]
    assert parser(prefix + "\n" + neg + "\\boxed{" + data.draw(st.sampled_from(choices)) + "}").status is Status.INVALID


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.permutations(["YES", "NO"]), joiner, anything)
def test_conflicting_first_yes_no_is_invalid(prefix, words, join, rest):
    text = _without(prefix, "*", "</think>") + "\n" + f"**{words[0]}**{join}**{words[1]}**" + _without(rest, "</think>")
    assert parse_yes_no(text).status is Status.INVALID


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.sampled_from(["YES", "NO"]), negation, anything)
def test_negated_first_yes_no_is_invalid(prefix, word, neg, rest):
    text = _without(prefix, "*", "</think>") + "\n" + neg + f"**{word}**" + _without(rest, "</think>")
    assert parse_yes_no(text).status is Status.INVALID


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(LINE)), anything, st.data(), line_filler, line_filler, line_filler)
def test_conflicting_final_line_is_invalid(name, prefix, data, f1, f2, f3):
    parser, tokens = LINE[name]
    x, y = data.draw(st.permutations(tokens))[:2]
    assert parser(prefix + "\n</think>\n" + f1 + x + f2 + y + f3).status is Status.INVALID


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(LINE)), anything, st.data(), negation, line_filler)
def test_negated_final_line_is_invalid(name, prefix, data, neg, filler):
    parser, tokens = LINE[name]
    assert parser(prefix + "\n</think>\n" + filler + neg + data.draw(st.sampled_from(tokens))).status is Status.INVALID


@settings(max_examples=200, deadline=None)
@given(anything, anything, anything, st.permutations(["Correct", "Incorrect"]))
def test_conflicting_consistency_tags_are_invalid(a, b, c, words):
    a, b, c = (_without(t, "</think>") for t in (a, b, c))
    text = f"{a}<consistency>{words[0]}</consistency>{b}<consistency>{words[1]}</consistency>{c}"
    assert parse_consistency(text).status is Status.INVALID


# echoes of each prompt's own format instructions (rewardkit/prompts) are never a verdict
ECHOES = [
    (parse_boxed_choice, "Your response MUST end with exactly one of: \\boxed{A}, \\boxed{B}, or \\boxed{Tie}."),
    (parse_boxed_score, "Your response MUST end with exactly one of: \\boxed{1}, \\boxed{0.5}, or \\boxed{0}."),
    (parse_boxed_score, 'conclude with "Based on my evaluation, the final overall score should be:" followed by exactly '
                        "one of: \\boxed{1}, \\boxed{0.5}, or \\boxed{0}."),
    (parse_yes_no, "Analyze this reasoning very briefly, then answer **YES** or **NO**, then give a short rationale."),
    (parse_yes_no, "respond with '**YES**' for high quality or '**NO**' if it is not."),
    (parse_answer_choice, 'Then, on the last line, write exactly one verdict: "Answer 1" if the first answer is better, '
                          '"Answer 2" if the second answer is better, or "tie" if they are equally good.'),
    (parse_true_false, "First explain your reasoning, then end your response with your final judgment: True or False."),
    (parse_consistency, "<consistency>[Correct/Incorrect]</consistency>"),
]


@pytest.mark.parametrize(("parser", "echo"), ECHOES)
def test_instruction_echo_is_invalid(parser, echo):
    """A judge that repeats the format instructions used to get the last listed option (Tie, 0, NO, False)."""
    assert parser(echo).status is Status.INVALID
    assert parser("Let me restate the task.\n" + echo).status is Status.INVALID


@settings(max_examples=300, deadline=None)
@given(anything)
def test_fuzz_boxed_contents_are_balanced(text):
    for c in boxed_contents(text):
        depth = 0
        for ch in c:
            depth += {"{": 1, "}": -1}.get(ch, 0)
            assert depth >= 0
        assert depth == 0
