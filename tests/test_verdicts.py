"""Verdict parsing under the one rule (docs/verdicts.md): the papers' printed judge outputs, regression tables
(hand-written and real judge outputs), property tests in both directions (clear verdicts in every paper's format,
with prose, formatting and labels around them, are read; paraphrases, negations, hedges, loser labels, later
verdicts and truncations are invalid, never a flip), and a fuzz test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rewardkit.types import Status
from rewardkit.verdicts import (
    PARSERS,
    boxed_contents,
    parse_answer_choice,
    parse_boxed_choice,
    parse_boxed_score,
    parse_consistency,
    parse_expert_policy,
    parse_true_false,
    parse_yes_no,
)

FIXTURE = Path(__file__).parent / "fixtures" / "judge_outputs.json"

# (parser, judge output, expected label or None for invalid); outputs written the way judges write them.
# "was X": what the parser before issue 21 read; "34: was invalid": refused by the label rule that issue 34 withdrew.
TABLE = [
    # Reasoning Arena App. D: "Your response MUST end with exactly one of: \boxed{A}, \boxed{B}, or \boxed{Tie}"
    (parse_boxed_choice, "Response A is right.\nFinal verdict: $\\boxed{A}$", "A"),
    (parse_boxed_choice, "Response A is right. Final verdict: $\\boxed{A}$", "A"),  # reasoning on its line (34: was invalid)
    (parse_boxed_choice, "Both reach 420.\n\n\\boxed{Tie}", "Tie"),
    (parse_boxed_choice, "\\boxed{tie}", "Tie"),
    (parse_boxed_choice, "\\boxed{ B }", "B"),
    (parse_boxed_choice, "\\boxed{\\text{B}}", "B"),
    (parse_boxed_choice, "\\boxed {A}", "A"),
    (parse_boxed_choice, "**Final verdict:** \\(\\boxed{B}\\).", "B"),
    (parse_boxed_choice, "At first \\boxed{A}.\n\nOn reflection:\n\\boxed{B}", None),  # an earlier line ends in A
    (parse_boxed_choice, "At first \\boxed{A}. On reflection, \\boxed{B}", None),  # two verdicts on its line (was B)
    (parse_boxed_choice, "At first \\boxed{A}, but on reflection \\boxed{B}", None),
    (parse_boxed_choice, "Therefore, the better response is \\boxed{A}.", "A"),  # 34: was invalid
    (parse_boxed_choice, "definitely not \\boxed{B}", None),
    (parse_boxed_choice, "A is right, so not $\\boxed{B}$", None),
    (parse_boxed_choice, "\\boxed{B} is wrong", None),
    (parse_boxed_choice, "\\boxed{A}?", None),  # a hedge
    (parse_boxed_choice, "\\boxed{A}\n\nNote: B might be better.", None),  # the verdict does not end the response
    (parse_boxed_choice, "must end with exactly one of: \\boxed{A}, \\boxed{B}, or \\boxed{Tie}.", None),  # echo
    (parse_boxed_choice, "\\boxed{A}\\boxed{B}", None),
    (parse_boxed_choice, "one of \\boxed{A}, \\boxed{B}, or \\boxed{Tie}.\n\nA errs in step 2.\n\\boxed{B}", "B"),
    (parse_boxed_choice, "A is right, B is not.\n\\boxed{A}", "A"),  # a negation on another line
    (parse_boxed_choice, "A is right, B is not. \\boxed{A}", "A"),  # the negation is another sentence's (34: was invalid)
    (parse_boxed_choice, "<think>\\boxed{A}</think>Final verdict: \\boxed{B}", "B"),
    (parse_boxed_choice, "\\boxed{B} and the answer is \\boxed{420}", None),  # does not end with a verdict (was B)
    (parse_boxed_choice, "<think>Comparing the two: A computes 24 which", None),  # cut off mid-reasoning
    (parse_boxed_choice, "Response A is better.", None),  # no box: never guessed from prose
    (parse_boxed_choice, "\\boxed{C}", None),
    (parse_boxed_choice, "\\boxed{A or B}", None),
    (parse_boxed_choice, "\\boxed{A", None),  # unclosed
    (parse_boxed_choice, "", None),
    (parse_boxed_score, "Minor slip in step 3.\n\\boxed{0.5}", "0.5"),
    (parse_boxed_score, "Minor slip in step 3. \\boxed{0.5}", "0.5"),  # 34: was invalid
    (parse_boxed_score, "\\boxed{\\frac{1}{2}}", "0.5"),
    (parse_boxed_score, "\\boxed{1}", "1"),
    (parse_boxed_score, "\\boxed{1.0}", "1"),
    (parse_boxed_score, "\\boxed{0}", "0"),
    (parse_boxed_score, "wrong: \\boxed{0} ... actually fine \\boxed{1}", None),  # two verdicts on its line (was 1)
    (parse_boxed_score, "\\boxed{0.7}", None),
    (parse_boxed_score, "Score it as \\boxed{1}, \\boxed{0.5}, or \\boxed{0}", None),  # echo: never the last, 0
    (parse_boxed_score, "the final overall score should be: \\boxed{0.5}", "0.5"),  # RLAIF rubric ending
    (parse_boxed_score, "Based on my evaluation, the final overall score should be: \\boxed{1}.", "1"),
    (parse_boxed_score, "score: 1", None),
    # JURY-RL App. D: "end your response with your final judgment: True or False"
    (parse_true_false, "Final judgment: False.", "False"),  # JURY-RL App. D example
    (parse_true_false, "This value does not match 1152. Therefore, the given answer is incorrect.\n\nFinal judgment: False.",
     "False"),
    (parse_true_false, "so it is true... Final judgment: False.", "False"),  # prose "true", then the verdict (34: was invalid)
    (parse_true_false, "**Final judgment:** **True**", "True"),
    (parse_true_false, "The answer matches the question, so: True", "True"),  # 34: was invalid
    (parse_true_false, "True\nNote: this might be False", None),  # a note after the verdict (was False)
    (parse_true_false, "True\n\nNote: False", None),  # "Note:" is no label
    (parse_true_false, "It is not true.", None),
    (parse_true_false, "Final judgment: probably True", None),
    (parse_true_false, "True or False", None),  # echo: never the last, False
    (parse_true_false, "False\n\nExplanation: the sum is 12.", "False"),  # nothing after it takes it back (34: was invalid)
    (parse_true_false, "no idea", None),
    # JURY-RL App. C.5: "Return exactly one xml object ... <consistency>[Correct/Incorrect]</consistency>"
    (parse_consistency, "<comments>...</comments>\n<consistency>Incorrect</consistency>", "Incorrect"),
    (parse_consistency, "<consistency>[Correct]</consistency>\n```", "Correct"),
    (parse_consistency, "x <consistency>[Correct]</consistency>", "Correct"),  # 34: was invalid
    (parse_consistency, "The statement is not exact.\n<consistency>Incorrect</consistency>", "Incorrect"),
    (parse_consistency, "<consistency>[Correct/Incorrect]</consistency>", None),  # echo of the format
    (parse_consistency, "<consistency>Correct</consistency> or <consistency>Incorrect</consistency>", None),
    (parse_consistency, "<consistency>Correct</consistency>\nOn reflection:\n<consistency>Incorrect</consistency>", None),
    (parse_consistency, "<think><consistency>Correct</consistency></think><consistency>Incorrect</consistency>",
     "Incorrect"),
    (parse_consistency, "Correct", None),
    # GAR App. B: "analyze ... briefly, then respond with '**YES**' ... or '**NO**' ... Finally, provide a ... explanation"
    (parse_yes_no, "The slice is sound.\n**YES**", "YES"),
    (parse_yes_no, "The slice is sound. **YES**", "YES"),  # the analysis before it, as in GAR Table 10 (34: was invalid)
    (parse_yes_no, "**no**", "NO"),
    (parse_yes_no, "**NO** -- Not high quality", "NO"),  # the verdict, then the explanation (was invalid)
    (parse_yes_no, "Verdict: **NO** (division by zero in step 2)", "NO"),
    (parse_yes_no, "**YES** The steps follow from the equation.", "YES"),  # the explanation starts a new sentence
    (parse_yes_no, "<p><b>**YES**</b></p> <p>The thinking process enumerates all permutations</p>", "YES"),  # Table 2
    (parse_yes_no, "**YES** is wrong here", None),  # the verdict runs on into a sentence
    (parse_yes_no, "**YES** ... no reason to answer **NO**", None),  # a second verdict after it (was YES)
    (parse_yes_no, "**YES**, since there is no reason to answer **NO**", None),
    (parse_yes_no, "**YES** ... wait, step 2 divides by zero. **NO**", None),  # was YES
    (parse_yes_no, "Step 2 divides by zero.\n\n**NO**\n\nThe division is invalid, so **YES** is wrong.", None),  # was NO
    (parse_yes_no, "**YES**NO**", None),  # overlapping markup holds both words
    (parse_yes_no, "I will answer **YES** or **NO**.", None),  # echo of the instructions
    (parse_yes_no, "**YES**/**NO**", None),
    (parse_yes_no, "The step is not **YES**", None),  # negated
    (parse_yes_no, "<think>**NO**</think>**YES**", "YES"),
    (parse_yes_no, "<think>The slice divides by", None),  # cut off
    (parse_yes_no, "YES", None),
    (parse_yes_no, "**MAYBE**", None),
    # RARO critic (App. E responses end "</think>\nAnswer 1"; our instruction: "on the last line, write exactly one verdict")
    (parse_answer_choice, "<think>Answer 1 looks off</think>Answer 2", "2"),
    (parse_answer_choice, "Final answer: tie", "tie"),
    (parse_answer_choice, "Both are equivalent, so: tie", "tie"),  # 34: was invalid
    (parse_answer_choice, "**Answer 2**", "2"),
    (parse_answer_choice, '"Answer 1".', "1"),
    (parse_answer_choice, "Answer 1 loses.", None),  # a predicate after the verdict (was 1)
    (parse_answer_choice, "I prefer Answer_1.", None),  # not the asked-for form, and a lead-in (was 1)
    (parse_answer_choice, "Answer 2 ... no, Answer 1", None),  # two verdicts on the verdict line
    (parse_answer_choice, "Answer 1 is better than Answer 2.", None),
    (parse_answer_choice, "Answer 2 (they do not tie)", None),
    (parse_answer_choice, "Answer 2 wins; it is not a tie.", None),
    (parse_answer_choice, "definitely not Answer 2", None),
    (parse_answer_choice, "Answer 1 is not correct.", None),
    (parse_answer_choice, "Answer 1 is correct.\nAnswer 2 is incorrect.\n</think>\n Answer 1", "1"),  # App. E
    (parse_answer_choice, "Answer 1 is wrong\n\nAnswer 2", "2"),  # earlier lines are reasoning
    (parse_answer_choice, "Answer 1\n\nNote: Answer 2 has an arithmetic slip.", None),  # last line is not a verdict
    (parse_answer_choice, "Final Judgment (1, 2 or tie): Answer 2", "2"),  # a label holding the choices in brackets
    (parse_answer_choice, '"Answer 1" if the first answer is better, "Answer 2" if the second, or "tie"', None),
    (parse_answer_choice, "Both are correct, neither is better.\ntie", "tie"),
    (parse_answer_choice, "Both are correct, neither is better. tie", "tie"),  # 34: was invalid
    # an embedded-model critic sample (benchmarks/results/raro_critic_budget.json), verbatim: the verdict line is followed
    # by a tie in the instructions' own terms ("both correct"); read as Answer 2 by the parser of issue 34
    (parse_answer_choice, "Answer 2\n\nBoth answers are correct. To summarize, the first answer is correct; using the "
                          "formula for the area of an isosceles triangle when sides have any length (both right triangles "
                          "are always there, clearly proved), the second answer will give us the same result:\n\n"
                          "\\[ A = \\frac{1}{2} \\times 100 = 100 \\]", None),
    (parse_answer_choice, "Answer 1\n\nThey are both wrong.", None),
    # issue 34's held-out audit, probes in the forms a critic writes: "neither" states a tie in the instructions' terms
    # (both wrong; neither better), and "Answer N:" with text after it is a heading for that answer's content, not a
    # verdict (the prompt lays the answers out as "Answer 1:\n<answer_1>"). All three were read as Answer 2.
    (parse_answer_choice, "Answer 2\n\nNeither answer is correct.", None),
    (parse_answer_choice, "Answer 1: 420\nAnswer 2: 421", None),
    (parse_answer_choice, "The correct answer is 420.\nAnswer 2: 420", None),
    (parse_answer_choice, "Answer 1 drops a sign.\nAnswer 2: the better answer.", "2"),  # a heading's line that says it won
    (parse_answer_choice, "Neither answer is better.\ntie", "tie"),
    (parse_answer_choice, "Answer 2\n\nBoth answers reach the same result.", None),  # was 2
    (parse_answer_choice, "Answer 1:\n<answer_1>\n420\n</answer_1>\n\nAnswer 2:\n<answer_2>\n421\n</answer_2>", None),  # the
    # prompt's layout echoed back (the embedded critic echoes its tags: math_cot_100-010/raro.critic): was 2
    (parse_expert_policy, "Expert: the derivation is idiomatic.\nPolicy: it repeats itself.", None),  # headings (was Policy)
    (parse_expert_policy, "Expert: the derivation is idiomatic.\nPolicy", "Policy"),
    (parse_answer_choice, "Answer 1 - both are equally good.", None),
    (parse_answer_choice, "tie\n\nBoth answers are correct.", "tie"),
    (parse_answer_choice, "Answer 1 is right and Answer 2 drops a sign; both use the same method.\nAnswer 1", "1"),
    (parse_answer_choice, "<think>Answer 1</think>no idea", None),  # only the part after </think> counts
    (parse_answer_choice, "<think>Answer 1 computes 24 which", None),  # the issue's cut-off critic (was 1)
    (parse_answer_choice, "Answer 12", None),
    (parse_answer_choice, "entire", None),  # "tie" inside a word is not a verdict
    # RARO binary critic (Sec. 3.2; our instruction: "on the last line, write exactly one verdict")
    (parse_expert_policy, "The derivation is idiomatic.\nExpert", "Expert"),
    (parse_expert_policy, "Final Judgment (Expert or Policy): Policy", "Policy"),
    (parse_expert_policy, "Expert or Policy", None),
    (parse_expert_policy, "Policy, I think", None),
    (parse_expert_policy, "Expert\n\nNote: it could be the Policy", None),
]


@pytest.mark.parametrize(("parser", "text", "label"), TABLE)
def test_regression_table(parser, text, label):
    v = parser(text)
    assert v.label == label
    assert v.status is (Status.OK if label is not None else Status.INVALID)
    if label is None:  # says why and shows the output's end
        tail = text[-120:].replace("\n", " ") if text else "<empty>"
        assert v.message and v.message.endswith(f" in judge output (ends: {tail!r})")
    else:
        assert v.message is None


# issue 29: a label naming the loser or a fault, or a question the judge asked itself, is no verdict; a verdict
# stated clearly with a label, punctuation inside its formatting, a box, or a score numerically equal to 1/0.5/0 is
# read. (parser, output, label or None); every row was read the other way before issue 29.
ISSUE_29 = [
    (parse_answer_choice, "Worse answer: Answer 2", None),  # a label naming the loser (was 2)
    (parse_boxed_choice, "Losing answer: \\boxed{B}", None),  # was B
    (parse_boxed_choice, "Incorrect answer: \\boxed{A}", None),  # a negative label (was A)
    (parse_true_false, "Is the answer incorrect? Answer: True", None),  # a question the judge asked itself (was True)
    (parse_yes_no, "Is there an error in this step? **YES** -- the sum is wrong.", None),  # its YES: an error (was YES)
    (parse_expert_policy, "Less likely answer: Policy", None),  # was Policy
    (parse_boxed_score, "Incorrect score: \\boxed{1}", None),  # was 1
    (parse_true_false, "Final judgment: \\boxed{True}", "True"),  # was invalid
    (parse_yes_no, "The step is fine.\n**YES.** It adds correctly.", "YES"),  # was invalid
    (parse_yes_no, "Final: **NO** -- wrong sum", "NO"),  # was invalid
    (parse_boxed_choice, "Final: \\boxed{A}", "A"),  # was invalid
    (parse_boxed_score, "Final score: \\boxed{0.50}", "0.5"),  # was invalid
    (parse_boxed_score, "\\boxed{1.00}", "1"),  # was invalid
    (parse_boxed_score, "\\boxed{\\dfrac{1}{2}}", "0.5"),  # was invalid
    (parse_answer_choice, "Verdict: \\boxed{\\text{Answer 1}}", "1"),  # was invalid
]


@pytest.mark.parametrize(("parser", "text", "label"), ISSUE_29)
def test_issue_29_no_verdict_read_as_its_opposite_and_every_clear_one_read(parser, text, label):
    v = parser(text)
    assert (v.label, v.status) == (label, Status.OK if label is not None else Status.INVALID), v.message


def test_a_self_question_is_named_in_the_message():
    v = parse_yes_no("Is there an error in this step? **YES**")
    assert "question" in v.message and "Is there an error in this step?" in v.message


@pytest.mark.parametrize("parser", PARSERS.values())
def test_a_generation_stopped_for_length_is_invalid(parser):
    """The backends return finish_reason; a judge that hit its token budget has given no verdict (for GAR: not
    when the budget ends the output at the verdict itself)."""
    texts = ("\\boxed{A}", "\\boxed{1}", "**YES**", "Answer 1", "Expert", "True", "<consistency>Correct</consistency>")
    valid = [t for t in texts if parser(t, finish_reason="stop").ok]
    assert len(valid) == 1  # each parser reads exactly its own form
    for text in texts:
        v = parser(text, finish_reason="length")
        assert v.status is Status.INVALID and (text not in valid or "length" in v.message)
        assert parser(text, finish_reason="stop").status is parser(text).status


def test_gar_keeps_a_verdict_whose_explanation_was_cut_at_k():
    """GAR caps the discriminator at K = 128 tokens, "preserving the verdict and truncating any justification
    beyond that limit" (Sec. 4.3): a stop inside the explanation keeps the verdict, a stop before it does not."""
    assert parse_yes_no("Brief analysis.\n**NO** -- the division in step 2 is by ze", finish_reason="length").label == "NO"
    assert parse_yes_no("<p><b>**YES**</b></p> <p>The thinking process enum", finish_reason="length").label == "YES"
    for cut in ("The step divides by", "**YES**", "**YES** is wr", "I answer **YES** or"):
        assert parse_yes_no(cut, finish_reason="length").status is Status.INVALID, cut
    for cut in ("**YES** -- the step is fine", "\\boxed{A}", "Answer 1", "Final judgment: True"):  # the others: never
        assert all(p(cut, finish_reason="length").status is Status.INVALID for n, p in PARSERS.items() if n != "yes_no")


def _fixture_rows():
    return json.loads(FIXTURE.read_text())["outputs"]


@pytest.mark.parametrize("row", _fixture_rows(), ids=lambda r: r["id"])
def test_real_judge_outputs(row):
    """The regression table: raw SmolLM2 judge outputs (benchmarks/judge_outputs.py) with hand-checked verdicts, the
    papers' printed judge outputs (paper/...) and clear verdicts in the forms instruct judges write (form/...)."""
    v = PARSERS[row["parser"]](row["text"], finish_reason=row.get("finish_reason"))
    assert v.label == row["expected"], row["why"]
    assert v.ok is (row["expected"] is not None)


def test_real_judge_outputs_cover_every_parser():
    """Every parser has outputs that must be read and outputs that must be refused, and the table holds at least
    as many of the first as of the second (issue 39: before issue 34, 40 of 42 rows expected 'invalid')."""
    rows = _fixture_rows()
    assert {r["parser"] for r in rows} == set(PARSERS)
    assert all(r["why"] and r["source"] for r in rows if r["expected"] is None)  # every invalid row says why
    for name in PARSERS:
        assert {r["expected"] is None for r in rows if r["parser"] == name} == {True, False}, name
    assert sum(r["expected"] is not None for r in rows) >= sum(r["expected"] is None for r in rows)


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
    assert parse_boxed_choice(text + "\n\\boxed{B}").label == "B"
    assert parse_boxed_score(text + "}" * 50_000).status is Status.INVALID


# ------------------------------------------------------------------------------------------ fuzz
TOKENS = [
    "\\boxed{", "\\boxed", "{", "}", "A", "B", "Tie", "tie", "C", "1", "0.5", "0", "1/2", "\\frac{1}{2}",
    "**", "YES", "NO", "yes", "Answer", "answer", " ", "\n", "_", ".", "$", "\\text{", "</think>", "<think>",
    "\\", "é", "\x00", "\U0001f600", "Answer 1", "Answer 2", "**YES**", "**NO**", "\\boxed{A}", "\\boxed{B}",
    "True", "false", "not ", " or ", ", ", "Final judgment:", "<consistency>", "</consistency>", "Correct",
    "Incorrect", "<consistency>Correct</consistency>", "\r\n", "Expert", "Policy", ":", "<b>", "</p>",
]
adversarial = st.lists(st.sampled_from(TOKENS), max_size=60).map("".join)
anything = st.one_of(st.text(max_size=400), adversarial)

ALLOWED = {
    "ab_tie": {"A", "B", "Tie"},
    "score": {"1", "0.5", "0"},
    "yes_no": {"YES", "NO"},
    "answer_choice": {"1", "2", "tie"},
    "expert_policy": {"Expert", "Policy"},
    "true_false": {"True", "False"},
    "consistency": {"Correct", "Incorrect"},
}


def _check_verdict(v, allowed):
    assert v.status in (Status.OK, Status.INVALID)
    if v.status is Status.OK:
        assert v.label in allowed and v.message is None
    else:
        assert v.label is None and isinstance(v.message, str)


def test_every_parser_is_fuzzed():
    assert set(PARSERS) == set(ALLOWED)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(anything, st.sampled_from([None, "stop", "length", ""]))
def test_fuzz_parsers_never_raise(text, reason):
    for name, parser in PARSERS.items():
        _check_verdict(parser(text, finish_reason=reason), ALLOWED[name])


# ------------------------------------------------- generated judge outputs, one family per parser
# Each parser: its verdict tokens in the asked-for form, a label the prompt (or the logit prefix) uses, where
# the verdict stands (end of the response, or first with an explanation after it), and paraphrases: the
# verdict said in words the prompt did not ask for.
FORMS = {
    "ab_tie": dict(parser=parse_boxed_choice, place="end", labels={"A": "A", "B": "B", "Tie": "Tie"},
                   token=lambda x: f"\\boxed{{{x}}}", label="Final verdict:",
                   paraphrase=["Response A is better.", "I choose B", "The verdict is A", "It is a tie.", "A"]),
    "score": dict(parser=parse_boxed_score, place="end", labels={"1": "1", "0.5": "0.5", "0": "0"},
                  token=lambda x: f"\\boxed{{{x}}}", label="Based on my evaluation, the final overall score should be:",
                  paraphrase=["Score: 1", "I would give it 0.5", "completely correct", "0"]),
    "yes_no": dict(parser=parse_yes_no, place="first", labels={"YES": "YES", "NO": "NO"},
                   token=lambda x: f"**{x}**", label="Verdict:",
                   paraphrase=["YES", "Yes, high quality.", "The reasoning is sound.", "NO", "*NO*"]),
    "answer_choice": dict(parser=parse_answer_choice, place="end", labels={"Answer 1": "1", "Answer 2": "2", "tie": "tie"},
                          token=lambda x: x, label="Final Judgment (1, 2 or tie):",
                          paraphrase=["The first answer is better.", "Answer one", "I pick 2", "They are equal.", "1"]),
    "expert_policy": dict(parser=parse_expert_policy, place="end", labels={"Expert": "Expert", "Policy": "Policy"},
                          token=lambda x: x, label="Final Judgment (Expert or Policy):",
                          paraphrase=["An expert wrote it.", "The model generated this.", "human", "machine"]),
    "true_false": dict(parser=parse_true_false, place="end", labels={"True": "True", "False": "False"},
                       token=lambda x: x, label="Final judgment:",
                       paraphrase=["Correct", "The answer matches the question.", "Yes", "It is wrong."]),
    "consistency": dict(parser=parse_consistency, place="first", labels={"Correct": "Correct", "Incorrect": "Incorrect"},
                        token=lambda x: f"<consistency>{x}</consistency>", label="",
                        paraphrase=["Correct", "The formalization is incorrect.", "<consistency>yes</consistency>",
                                    "<consistency>Correct-ish</consistency>"]),
}


def _without(text: str, *parts: str) -> str:
    """``text`` with every occurrence of ``parts`` gone (repeated, since removal can join new ones)."""
    low = [p.lower() for p in parts]
    while any(p in text.lower() for p in low):
        for p in low:
            i = text.lower().find(p)
            while i >= 0:
                text = text[:i] + text[i + len(p):]
                i = text.lower().find(p)
    return text


# reasoning a judge writes before its verdict: any text free of verdict words, think tags and boxes
VERDICT_WORDS = ("boxed", "answer", "tie", "yes", "no", "true", "false", "expert", "policy", "correct",
                 "consistency", "think", "**")
reasoning = st.text(st.characters(blacklist_categories=("Cs",)), max_size=200).map(
    lambda t: _without(t, *VERDICT_WORDS).strip())
formatting = st.sampled_from([("", ""), ("**", "**"), ("*", "*"), ('"', '"'), ("`", "`"), ("<b>", "</b>"),
                              ("$", "$"), ("\\(", "\\)")])
names = st.sampled_from(sorted(FORMS))


def _rendered(form: dict, verdict: str, fmt: tuple[str, str], labelled: bool, period: bool) -> str:
    line = f"{fmt[0]}{form['token'](verdict)}{fmt[1]}{'.' if period else ''}"
    return f"{form['label']} {line}" if labelled and form["label"] else line


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names, st.data(), reasoning, formatting, st.booleans(), st.booleans(), st.booleans(), reasoning)
def test_the_asked_for_form_is_read(name, data, before, fmt, labelled, period, think, after):
    """The verdict in the asked-for form, where the prompt asks for it, with formatting, a label, a trailing
    period, reasoning before it (in a think block or not), and for GAR an explanation after it, is read."""
    form = FORMS[name]
    verdict = data.draw(st.sampled_from(sorted(form["labels"])))
    line = _rendered(form, verdict, fmt, labelled, period)
    text = (f"<think>{before}</think>\n" if think else f"{before}\n\n") + line
    if name == "yes_no":
        text += f" - {after}" if after else ""
    elif name == "consistency":
        text += f"\n{after}" if after else ""
    assert form["parser"](text).label == form["labels"][verdict], text
    assert form["parser"](text, finish_reason="stop").label == form["labels"][verdict]


# labels naming the loser or a fault, and questions the judge may put to itself: never a verdict
NEGATIVE_ADJECTIVES = ["Worse", "Losing", "Incorrect", "Wrong", "Rejected", "Flawed", "Bad", "Invalid", "Weaker",
                       "Inferior", "Erroneous", "Failing", "Poorer", "Worst"]
NOUNS = ["answer", "response", "choice", "verdict", "judgment", "score", "result", "option", "solution", "one",
         "label", "decision"]
QUESTIONS = ["Is the answer incorrect?", "Is there an error in this step?", "Does response B win?",
             "Which one is worse?", "Is it wrong?", "Was this written by a model?", "Is the formalization wrong?",
             "Should it score lower?", "Are there mistakes?", "Is the step flawed?", "Did it fail?"]
negative_labels = st.builds(lambda final, adj, noun: f"{'Final ' if final else ''}{adj} {noun}:",
                            st.booleans(), st.sampled_from(NEGATIVE_ADJECTIVES), st.sampled_from(NOUNS))
self_questions = st.builds(lambda q, then: f"{q} {then}".strip(), st.sampled_from(QUESTIONS),
                           st.sampled_from(["", "Answer:", "Verdict:", "Final answer:", "Final:", "Judgment:"]))
label_formatting = st.sampled_from([("", ""), ("**", "**"), ("*", "*"), ("### ", "")])


def _labelled(name: str, verdict: str, label: str, fmt: tuple[str, str]) -> str:
    form = FORMS[name]
    return f"The reasoning comes first.\n\n{fmt[0]}{label}{fmt[1]} {form['token'](verdict)}"


@settings(max_examples=400, deadline=None)
@given(names, st.data(), st.one_of(negative_labels, self_questions), label_formatting)
def test_a_loser_label_or_a_self_question_makes_it_invalid(name, data, lead, fmt):
    """A label naming the loser or a fault, or a question the judge put to itself, before the verdict on its
    line: invalid (never read as the winner)."""
    form = FORMS[name]
    verdict = data.draw(st.sampled_from(sorted(form["labels"])))
    assert form["parser"](_labelled(name, verdict, lead, fmt)).status is Status.INVALID, (lead, verdict)


@settings(max_examples=300, deadline=None)
@given(names, st.data(), reasoning)
def test_paraphrases_are_invalid(name, data, before):
    """The verdict said in words the prompt did not ask for is never read."""
    form = FORMS[name]
    text = f"{before}\n\n{data.draw(st.sampled_from(form['paraphrase']))}"
    assert form["parser"](text).status is Status.INVALID, text


NEGATIONS = [("not ", ""), ("It is not ", "."), ("never ", ""), ("", " is wrong."), ("", " loses."),
             ("definitely not ", "."), ("", " (not really)")]
HEDGES = [("probably ", ""), ("maybe ", "."), ("", "?"), ("", ", I think."), ("I guess ", ""), ("", " (I am unsure)"),
          ("Perhaps: ", "")]


@settings(max_examples=300, deadline=None)
@given(names, st.data(), reasoning, st.sampled_from(NEGATIONS + HEDGES))
def test_negations_and_hedges_are_invalid(name, data, before, wrap):
    """A verdict negated or hedged on its line ("not \\boxed{B}", "Answer 1 loses.", "probably True",
    "Answer 2?") is no verdict. For GAR, text after a separator is the explanation the prompt asks for, so its
    hedges and negations are generated before the verdict or glued to it."""
    form = FORMS[name]
    pre, post = wrap
    assume(name != "yes_no" or pre or not post.startswith((",", " (")))  # there: the explanation
    verdict = data.draw(st.sampled_from(sorted(form["labels"])))
    text = f"{before}\n\n{pre}{form['token'](verdict)}{post}"
    assert form["parser"](text).status is Status.INVALID, text


@settings(max_examples=300, deadline=None)
@given(names, st.data(), reasoning, reasoning, st.sampled_from(["\n\nNote: ", "\n\nOn second thought, ", " ... wait, ",
                                                                  "\n\nP.S. it might be "]))
def test_a_second_verdict_after_it_is_invalid(name, data, before, between, note):
    """A different verdict after a verdict stated on its own line ("True" then "Note: this might be False") or
    later on the same line ("\\boxed{A} ... wait, \\boxed{B}"): two verdicts, neither sure. (For the end forms, a
    verdict corrected on a later line, "\\boxed{A} ... wait, let me redo this.\\n...\\n\\boxed{B}", is the final one:
    B, test_the_final_verdict_after_a_correction_is_read.)"""
    form = FORMS[name]
    first, second = data.draw(st.permutations(sorted(form["labels"])))[:2]
    between = between.replace("\n", " ")
    text = f"{before}\n\n{_rendered(form, first, ('', ''), False, False)}{note}{between} {form['token'](second)}"
    assert form["parser"](text).status is Status.INVALID, text


@settings(max_examples=300, deadline=None)
@given(names, st.data(), reasoning, st.integers(0, 10_000), st.booleans())
def test_truncations_are_invalid(name, data, before, cut, think):
    """A judge cut off by its token budget: the backend says finish_reason="length" (whatever the text holds),
    or the text stops inside an unclosed <think> block."""
    form = FORMS[name]
    verdict = data.draw(st.sampled_from(sorted(form["labels"])))
    full = f"{before}\n\n{_rendered(form, verdict, ('', ''), False, False)}"
    prefix = full[: cut % (len(full) + 1)]
    assert form["parser"](prefix, finish_reason="length").status is Status.INVALID
    if think:
        assert form["parser"](f"<think>{prefix}").status is Status.INVALID


# echoes of each prompt's own format instructions (rewardkit/prompts) are never a verdict
ECHOES = [
    (parse_boxed_choice, "Your response MUST end with exactly one of: \\boxed{A}, \\boxed{B}, or \\boxed{Tie}."),
    (parse_boxed_score, "Your response MUST end with exactly one of: \\boxed{1}, \\boxed{0.5}, or \\boxed{0}."),
    (parse_boxed_score, 'conclude with "Based on my evaluation, the final overall score should be:" followed by exactly '
                        "one of: \\boxed{1}, \\boxed{0.5}, or \\boxed{0}."),
    (parse_yes_no, "Analyze this reasoning very briefly, then answer **YES** or **NO** at the start of a line of its own, then give a short rationale."),
    (parse_yes_no, "respond with '**YES**' for high quality or '**NO**' if it is not."),
    (parse_answer_choice, 'Then, on the last line, write exactly one verdict: "Answer 1" if the first answer is better, '
                          '"Answer 2" if the second answer is better, or "tie" if they are equally good.'),
    (parse_expert_policy, 'Then, on the last line, write exactly one verdict: "Expert" if an expert wrote the answer, or '
                          '"Policy" if the model generated it.'),
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


# ------------------------------------------------- every judge scorer reads the backend's finish_reason
JUDGE_SCORERS = ["tournament", "arena", "pointwise", "adaptive-pointwise", "slices", "holistic", "critic",
                 "critic-binary", "llm-judge", "llm-judge-rollout"]


def _verdict_for(prompt: str) -> str:
    """A well-formed verdict for whichever paper prompt the scorer sent."""
    if "[RESPONSE A]" in prompt:
        return "Final verdict: \\boxed{A}"
    if "[RESPONSE]" in prompt:
        return "\\boxed{1}"
    if "Reasoning to evaluate" in prompt:
        return "The slice restates the problem.\n**YES**"  # a stop for length here is before any explanation
    if "<answer_1>" in prompt:
        return "Answer 1"
    if "<answer>" in prompt:
        return "Expert"
    return "Final judgment: True"


@pytest.mark.parametrize("name", JUDGE_SCORERS)
def test_every_judge_scorer_masks_a_judgment_cut_off_for_length(name):
    """The same well-formed verdict is read when the judge stopped on its own and is invalid when it stopped
    for length (before issue 21 no scorer looked at finish_reasons; GAR's ends at its verdict, so a length stop
    there leaves the verdict unfinished)."""
    from rewardkit.backends.base import Completion
    from rewardkit.scoring import get_scorer
    from rewardkit.testing import ScriptedJudge
    from rewardkit.types import Group

    group = Group("g", "What is 2 + 2?", ["2 + 2 = 4, so \\boxed{4}", "so the answer is \\boxed{4}"],
                  reference="4", expert="2 + 2 = \\boxed{4}")
    statuses = {}
    for reason in ("stop", "length"):
        judge = ScriptedJudge(reply=lambda p, r=reason: Completion([_verdict_for(p)], finish_reasons=[r]))
        (score,) = get_scorer(name, judge=judge, mode="generate").score([group])
        assert judge.requests, f"{name}: the judge was not asked"
        statuses[reason] = score.statuses
    assert all(s is Status.OK for s in statuses["stop"]), statuses
    assert all(s is Status.INVALID for s in statuses["length"]), statuses


# ------------------------------------------------- issue 34: the papers' own judges must be understood
def _paper_rows():
    return [r for r in _fixture_rows() if r["id"].startswith("paper/")]


@pytest.mark.parametrize("row", _paper_rows(), ids=lambda r: r["id"])
def test_the_papers_printed_judge_outputs_are_read_as_printed(row):
    """Reasoning Arena App. C (both demos), GAR Tables 2, 10, 11 (8 judgments, HTML on one line as printed; Table
    10's "... a contradiction.</u>  **YES**"), RARO App. E Figs. 18-20 ("Final Judgment:\\nPoem 2"), JURY-RL App. H
    ("Final judgment: False."), verbatim: before issue 34, 11 of these 14 were refused."""
    v = PARSERS[row["parser"]](row["text"])
    assert (v.label, v.status) == (row["expected"], Status.OK), (row["source"], v.message)
    # the same judgment laid out in paragraphs (GAR's HTML split at its paragraphs) reads the same
    assert PARSERS[row["parser"]](row["text"].replace("</p> <p>", "</p>\n\n<p>")).label == row["expected"]


def test_the_papers_printed_outputs_cover_every_paper():
    rows = _paper_rows()
    counts = {p: sum(r["id"].startswith(f"paper/{p}") for r in rows)
              for p in ("arena-appC", "gar-table", "raro-fig", "jury-appH")}
    assert counts == {"arena-appC": 2, "gar-table": 8, "raro-fig": 3, "jury-appH": 1}
    assert all(r["expected"] for r in rows)  # the papers print no invalid judgment


# every clear verdict the issue lists (each was refused before issue 34), and the same forms in other languages
ISSUE_34_READ = [
    (parse_boxed_choice, "The better response is: \\boxed{A}", "A"),
    (parse_boxed_choice, "Therefore, my final verdict is $\\boxed{B}$.", "B"),
    (parse_boxed_choice, "Both are correct. \\boxed{Tie}", "Tie"),
    (parse_boxed_choice, "**Conclusion:** \\boxed{A}", "A"),
    (parse_true_false, "Final Judgement: True", "True"),  # JURY-RL C.5's own spelling
    (parse_true_false, "Therefore, the final judgment is: False", "False"),
    (parse_answer_choice, "I prefer Answer 2.", "2"),
    (parse_answer_choice, "Answer 2 is better.", "2"),
    (parse_answer_choice, "Final Judgment:\nPoem 2", "2"),  # RARO Fig. 20's poetry critic
    (parse_boxed_choice, "最终判断：\\boxed{A}", "A"),  # Chinese label
    (parse_boxed_choice, "综上所述，回答B更好。\\boxed{B}", "B"),
    (parse_boxed_choice, "Veredicto final: \\boxed{B}", "B"),  # Spanish label
    (parse_boxed_choice, "Por lo tanto, la mejor respuesta es la B: \\boxed{B}", "B"),
    (parse_true_false, "Juicio final: False", "False"),
    (parse_yes_no, "结论：**YES** 推理是正确的。", "YES"),
    (parse_boxed_score, "The score is: \\[ \\boxed{0.5} \\]", "0.5"),
    (parse_boxed_score, "The response is completely correct. $\\boxed{\\text{1}}$", "1"),
    (parse_boxed_choice, "Response B has a gap, so Response A is better: \\boxed{A}!", "A"),
    (parse_boxed_choice, "**The final verdict is**: <b>\\boxed{B}</b>.", "B"),
    (parse_yes_no, "The step applies the parity rule correctly. **YES** The logic is sound.", "YES"),
    (parse_yes_no, "It divides by zero in step 2.</u>  **NO**</p> <p>The division is undefined.</p>", "NO"),
    (parse_answer_choice, "Answer 1 computes 87, not 24.\nAnswer 2 is correct.", "2"),
    (parse_expert_policy, "The derivation skips no step, so I judge: Expert.", "Expert"),
    (parse_consistency, "Both match. <consistency>Correct</consistency>", "Correct"),
    # a reason in a subordinate clause is about another response, or agrees with a right/wrong verdict
    (parse_boxed_choice, "Since Response A arrives at 27 while Response B does not, the answer is $\\boxed{A}$.", "A"),
    (parse_boxed_choice, "Since Response B is wrong, \\boxed{A}", "A"),
    (parse_true_false, "Since the answer does not match, the final judgment is: False", "False"),
    (parse_yes_no, "Since the step divides by zero without a check, **NO** -- invalid.", "NO"),
    (parse_boxed_score, "Since the final answer is wrong, \\boxed{0}", "0"),
    (parse_yes_no, "Is the reasoning rigorous and accurate? **YES**", "YES"),  # the prompt's own question
    (parse_true_false, "Final judgment: **False**\n\nIt is 1152 only if the constraint is an equality, which it is not.",
     "False"),
    (parse_boxed_score, "Final Score: $\\boxed{0.5}$ (minor errors)", "0.5"),  # a remark that agrees with the score
    (parse_boxed_score, "\\boxed{0} (incorrect/fatal errors)", "0"),
]

# what stays invalid under the issue-34 rule: no human could be sure of these (never a flip)
ISSUE_34_REFUSED = [
    (parse_boxed_choice, "Worse answer: \\boxed{B}", None),  # a clause naming it the loser
    (parse_answer_choice, "Worse answer: Answer 2", None),
    (parse_boxed_choice, "Incorrect answer: \\boxed{A}", None),  # ... or a fault
    (parse_boxed_choice, "Respuesta incorrecta: \\boxed{A}", None),
    (parse_boxed_choice, "错误答案：\\boxed{A}", None),
    (parse_boxed_choice, "Incorrect answer, in my view, \\boxed{B}", None),
    (parse_boxed_choice, "Response A is better, not \\boxed{B}", None),  # a negation bound to it
    (parse_boxed_choice, "Eliminate \\boxed{B}", None),
    (parse_boxed_choice, "Since it is the worse one, \\boxed{B}", None),  # the reason may be about this verdict
    (parse_true_false, "Since there is an error, True", None),  # a reason against the verdict
    (parse_yes_no, "Since there is no error, **NO**", None),
    (parse_boxed_score, "Errors: \\boxed{0}", None),  # a count of errors, or a score of 0?
    (parse_yes_no, "Does the step contain a mistake? **NO**", None),  # not the prompt's question
    (parse_true_false, "True\n\nThe given answer is incorrect.", None),  # the text after it argues the other way
    (parse_boxed_choice, "I initially thought \\boxed{B}, but Response A is better.", None),  # taken back on its line
    (parse_yes_no, "**YES**, there is an error in step 2.", None),  # its explanation answers another question
    (parse_yes_no, "**NO**, there are no errors.", None),
    (parse_yes_no, "**NO** Issues found.", None),  # NO as a word of the phrase "no issues"
    (parse_boxed_score, "\\boxed{0} (no errors)", None),  # a 0 beside a fault denied
    (parse_true_false, "False\n\nThere is no mistake.", None),
    (parse_boxed_choice, "Response B lacks rigor: \\boxed{B}", None),
    (parse_yes_no, "Is there an error? **YES**", None),  # a question bound to it
    (parse_boxed_choice, "Response B is better than \\boxed{A}", None),  # a comparison
    (parse_boxed_choice, "It could be \\boxed{A}.", None),  # a hedge
    (parse_boxed_choice, "Either \\boxed{A} or \\boxed{B}", None),  # two verdicts at its place
    (parse_answer_choice, "Answer 2 is better than Answer 1.", None),
    (parse_answer_choice, "Answer 1 loses.", None),
    (parse_answer_choice, "Answer 1 is incorrect.", None),
    (parse_boxed_choice, "\\boxed{A}\n\nOn second thought, Response B is more complete.", None),  # taken back
    (parse_true_false, "The sum is right, which is true.", None),  # prose, no verdict
    (parse_true_false, "Final judgment: False\n\nActually, it might be True.", None),
    (parse_yes_no, "The step adds 3 and 4.\n\n**NO**\n\nThe reasoning is correct.", None),  # a NO its rationale calls right
    (parse_yes_no, "**NO** -- the step is sound.", None),
    (parse_true_false, "Final judgment: False\n\nThe proposed answer is correct.", None),
    (parse_yes_no, "Since the step is rigorous, **NO**", None),
]

# ... and a NO whose rationale grants something but names what is wrong, or denies the prompt's praise, is read
ISSUE_34_READ += [
    (parse_yes_no, "**NO**. The first part is correct, but the second step divides by zero.", "NO"),
    (parse_yes_no, "**NO**\n\nThe reasoning is not rigorous: it assumes what it proves.", "NO"),
    (parse_true_false, "Final judgment: False\n\nThe proposed answer is incorrect.", "False"),
    (parse_yes_no, "**YES**\n\nThe reasoning is correct.", "YES"),
    (parse_true_false, "Final judgment: False\n\nThe correct answer is 15.", "False"),  # the problem's answer, no praise
    (parse_yes_no, "**NO**\n\nThe correct value is 12.", "NO"),
    (parse_boxed_score, "\\boxed{0}\n\nComplete.", "0"),
]


def test_the_final_verdict_after_a_correction_is_read():
    """The end forms read the final verdict: a judge that corrects itself on a later line has given that one."""
    assert parse_boxed_choice("At first glance \\boxed{A} ... wait, step 2 of A divides by zero.\n"
                              "So Response B is better. \\boxed{B}").label == "B"
    assert parse_answer_choice("Answer 1 looked right, but step 2 fails.\nAnswer 2").label == "2"


@pytest.mark.parametrize(("parser", "text", "label"), ISSUE_34_READ + ISSUE_34_REFUSED)
def test_issue_34_clear_verdicts_are_read_and_unsure_ones_refused(parser, text, label):
    v = parser(text)
    assert (v.label, v.status) == (label, Status.OK if label is not None else Status.INVALID), v.message


# generated clear verdicts: prose before them on their line, any label (several languages), formatting around them,
# trailing punctuation, a positive predicate, text after them that takes nothing back (no word of a prompt's own
# right/wrong question: "**NO**\n\nThe reasoning is rigorous." argues for the other verdict)
NEUTRAL_WORDS = ["the", "sum", "step", "computes", "12", "divides", "checks", "derivation", "reference", "matches",
                 "carefully", "first", "then", "response", "reasoning", "is", "long", "careful", "both", "argument",
                 "shows", "value", "we", "compare", "case", "each", "parity", "factor", "clear", "neat", "π", "x^2",
                 "ratio", "integral", "polar", "coordinates", "gives", "$2^{3-n}$", "<math>n</math>", "(see above)"]
sentence = st.lists(st.sampled_from(NEUTRAL_WORDS), min_size=1, max_size=12).map(
    lambda ws: " ".join(ws).capitalize() + ".")
prose = st.lists(sentence, max_size=3).map(" ".join)
LEADS = ["", "Final verdict:", "Verdict:", "Final Judgement:", "Final judgment:", "Conclusion:", "**Conclusion:**",
         "Therefore, my final verdict is", "The better one is:", "So the result is", "### Final answer", "最终判断：",
         "结论：", "Veredicto final:", "Juicio final:", "Respuesta final:", "Urteil:", "Verdict final :", "Decision -",
         "Based on my evaluation, the final overall score should be:", "<p><b>Verdict</b>:", "Overall,"]
WRAPS = [("", ""), ("**", "**"), ("$", "$"), ("\\[ ", " \\]"), ("\\( ", " \\)"), ("<b>", "</b>"), ("`", "`"),
         ("*", "*"), ("<p><b>", "</b></p>"), ('"', '"')]


def _token(name: str, verdict: str, text_box: bool) -> str:
    if name in ("ab_tie", "score"):
        return f"\\boxed{{\\text{{{verdict}}}}}" if text_box else f"\\boxed{{{verdict}}}"
    return FORMS[name]["token"](verdict)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names, st.data(), prose, prose, st.sampled_from(LEADS), st.sampled_from(WRAPS), st.booleans(),
       st.sampled_from(["", ".", "!", " ."]), st.sampled_from(["", "\n\n", " -- ", "</p> <p>", " ("]), sentence,
       st.booleans())
def test_generated_clear_verdicts_in_every_papers_format_are_read(name, data, above, before, lead, wrap, text_box,
                                                                  punct, after_sep, after, think):
    """The opposite direction of the never-a-flip properties: a clear verdict in each paper's format, with
    reasoning above it and before it on its line, a label in any language, markdown, math, ``\\text{}``, HTML, a
    trailing period and, after it, text that names no other verdict, is read."""
    form = FORMS[name]
    verdict = data.draw(st.sampled_from(sorted(form["labels"])))
    if name == "score" and lead == "So the result is":  # a number boxed after "the result is" may be the problem's
        lead = "Overall,"                                 # answer: refused by design (docs/verdicts.md)
    line = f"{before} {lead} {wrap[0]}{_token(name, verdict, text_box)}{wrap[1]}{punct}".strip()
    if name == "answer_choice" and verdict != "tie":
        line += data.draw(st.sampled_from(["", " is better.", " is the better answer.", " is correct."]))
    text = (f"<think>{above}</think>\n" if think else f"{above}\n\n") + line
    if after_sep and (name in ("yes_no", "consistency") or after_sep == "\n\n"):
        text += f"{after_sep}{after}"  # GAR's rationale after a separator; the other forms' closing remark
    v = form["parser"](text)
    assert (v.label, v.status) == (form["labels"][verdict], Status.OK), (text, v.message)


def _docs_examples() -> list[tuple[str, str, str]]:
    docs = (Path(__file__).parents[1] / "docs" / "verdicts.md").read_text()
    table = docs.split("| output | parser | verdict |", 1)[1].split("\n\n", 1)[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.strip().splitlines()[1:]]
    return [(out.strip("`").replace("\\n", "\n"), parser.strip("`"), verdict) for out, parser, verdict in rows]


@pytest.mark.parametrize(("text", "parser", "verdict"), _docs_examples())
def test_the_docs_examples_read_as_the_docs_say(text, parser, verdict):
    """docs/verdicts.md's examples table is what the parsers do."""
    v = {p.__name__: p for p in PARSERS.values()}[parser](text)
    assert (v.label if v.ok else "invalid") == verdict, v.message


def test_the_docs_list_every_parser_and_its_printed_examples():
    docs = (Path(__file__).parents[1] / "docs" / "verdicts.md").read_text()
    assert all(f"| `{p.__name__}` |" in docs for p in PARSERS.values())
    assert len(_docs_examples()) >= 20 and {p for _, p, _ in _docs_examples()} == {p.__name__ for p in PARSERS.values()}


def test_verdict_start_is_where_the_parser_reads_the_verdict():
    """GAR's M_d is read at the place of the verdict the parser read (after the judgment's own analysis): a bare
    'yes' earlier in the analysis, or a verdict inside <think>, is not that place."""
    from rewardkit.prompts.gar import DISCRIMINATOR_FORM as form

    for text, before in [("yes, the step is fine. **yes** Good.", "yes, the step is fine. "),
                         ("<think>**NO** maybe</think>The step holds. **YES** It is fine.",
                          "<think>**NO** maybe</think>The step holds. ")]:
        assert form.read(text).status is Status.OK
        assert text[:form.verdict_start(text)] == before
    assert form.verdict_start("No verdict at all.") is None


def test_boxed_choice_reads_the_choices_it_is_given():
    """``choices`` is the set of boxed verdicts the prompt asks for: a box outside it is no verdict, one inside it
    is read (a three-way prompt's \\boxed{C}; a prompt without Tie refuses \\boxed{Tie})."""
    three = ("A", "B", "C")
    assert parse_boxed_choice("B omits a step; C is complete.\n\\boxed{C}", choices=three).label == "C"
    assert parse_boxed_choice("\\boxed{c}", choices=three).label == "C"
    assert parse_boxed_choice("\\boxed{Tie}", choices=three).status is Status.INVALID
    assert parse_boxed_choice("Both agree.\n\\boxed{Tie}", choices=["A", "B"]).status is Status.INVALID
    assert parse_boxed_choice("\\boxed{C}").status is Status.INVALID  # the default: A, B or Tie
    # what follows may not name another of the choices (a capital letter, or a longer choice in any case) ...
    assert parse_boxed_choice("\\boxed{C}\n\nResponse B is better.", choices=three).status is Status.INVALID
    assert parse_boxed_choice("\\boxed{Yes}\n\nThe answer is No.", choices=("Yes", "No")).status is Status.INVALID
    # ... but may name the verdict itself beside it, and a lower-case letter is a variable, not a choice
    assert parse_boxed_choice("\\boxed{C}\n\nB and C differ in step 2; C is right.", choices=three).label == "C"
    assert parse_boxed_choice("\\boxed{A}\n\nIt solves for b correctly.", choices=three).label == "A"
    assert parse_boxed_choice("\\boxed{1}\n\nIn step 2 the sum is 12.", choices=("1", "2")).label == "1"  # a number


def test_an_invalid_verdict_says_why_and_shows_the_outputs_last_120_characters_on_one_line():
    """The message names the form and the reason, and quotes the end of the output (module docstring)."""
    text = "".join(f"Step {i}: both responses agree here.\n" for i in range(12)) + "Response A is better."
    v = parse_boxed_choice(text)
    assert v.status is Status.INVALID
    assert v.message == ("no boxed A/B/Tie verdict where the prompt asks for one in judge output "
                         f"(ends: {text[-120:].replace(chr(10), ' ')!r})")
    assert parse_boxed_choice("").message.endswith("in judge output (ends: '<empty>')")
    assert parse_yes_no("**NO** Issues found.").message.startswith("the verdict runs on into its sentence (")


def test_boxed_contents_skips_boxes_longer_than_max_len():
    assert boxed_contents("\\boxed{12345678} then \\boxed{ok}", max_len=4) == ["ok"]
    assert boxed_contents("\\boxed{12345678} then \\boxed{ok}") == ["12345678", "ok"]


def test_response_trunk_is_the_text_after_the_reasoning():
    """After the last </think>, stripped; a <think> never closed: only what precedes the first one; no tags: all."""
    from rewardkit.verdicts import response_trunk

    assert response_trunk("<think>try 1</think>\n<think>try 2</think>\n  So the answer is 4.  ") == "So the answer is 4."
    assert response_trunk("Let me think. <think>maybe <think>the sum is") == "Let me think."
    assert response_trunk("<think>reasoning cut off") == ""
    assert response_trunk("no tags at all") == "no tags at all"


def test_three_faults_named_after_a_true_argue_the_other_way():
    """An odd number of negations and fault words turns a right/wrong verdict: three faults after True, as one."""
    assert parse_true_false("Final judgment: True\n\nThe proof is wrong.").status is Status.INVALID
    assert parse_true_false("Final judgment: True\n\nThe proof is wrong, flawed and incomplete.").status is Status.INVALID
    assert parse_true_false("Final judgment: True\n\nNo step is wrong, none is missing.").label == "True"


def test_an_earlier_box_that_does_not_end_its_line_is_no_earlier_verdict():
    """Only an earlier verdict that ends its line (on any line, not only the first) conflicts with the final one."""
    assert parse_boxed_choice("Intro.\nExample: \\boxed{A}, as the prompt shows.\nMy verdict:\n\\boxed{B}").label == "B"
    assert parse_boxed_choice("Intro.\nGrid cell \\boxed{A} X\nMy verdict:\n\\boxed{B}").label == "B"  # a word follows
    assert parse_boxed_choice("Intro.\nFirst pick: \\boxed{A}\nMy verdict:\n\\boxed{B}").status is Status.INVALID


def test_gar_explanation_read_after_its_separator():
    """GAR's explanation after "**YES**." is its first sentence; one naming a fault argues against the YES."""
    assert parse_yes_no("**YES**. The sum in step 2 is wrong.").status is Status.INVALID
    assert parse_yes_no("**YES**. The sum in step 2 is right.").label == "YES"


def test_an_invalid_verdicts_message_quotes_the_words_that_decided_it():
    """The reason names what turned the verdict and quotes those words (a long clause: its last 60 characters, next to
    the verdict; an explanation: its first 60; a run-on line: its first 40), verdicts joined by '/'."""
    cases = [
        (parse_boxed_choice, "Having read both derivations line by line, I would probably go with \\boxed{A}",
         "it is hedged or compared ('probably' in 'read both derivations line by line, I would probably go with')"),
        (parse_boxed_choice, "Having carefully read both derivations line by line, the worse one is \\boxed{B}",
         "it is negated or named a loser or a fault "
         f"('worse' in {'Having carefully read both derivations line by line, the worse one is'[-60:]!r})"),
        (parse_boxed_choice, "The worse, wrong and flawed answer is \\boxed{B}",
         "('worse/wrong/flawed' in 'The worse, wrong and flawed answer is')"),
        (parse_yes_no, "**YES**. The sum in step 2 of the derivation, which everything after it relies on, is wrong.",
         "the explanation's first sentence argues against the verdict YES ('The sum in step 2 of the derivation, "
         "which everything after ')"),
        (parse_boxed_choice, "\\boxed{A} and then some more words that run on for quite a long while here",
         "the verdict line goes on after the verdict ('and then some more words that run on for')"),
        (parse_boxed_choice, "\\boxed{A}<br>?", "the verdict line goes on after the verdict ('?')"),
        (parse_boxed_choice, "Final verdict: \\boxed{A}, but let me recheck step 2.",
         "what follows the verdict on its line does not agree with it: it takes the verdict back ('but')"),
        (parse_boxed_score, "Score: \\boxed{1}. The answer is wrong.",
         "what follows the verdict on its line does not agree with it: it argues the other way in judge output"),
        (parse_boxed_choice, "must end with exactly one of: \\boxed{A}, \\boxed{B}, or \\boxed{Tie}.",
         "two different verdicts on the verdict's line (Tie and A/B)"),
        (parse_boxed_choice, "Final verdict: \\boxed{A}, ahead of B and Tie.",
         "what follows the verdict on its line does not agree with it: it names another verdict (B/Tie)"),
    ]
    for parser, text, why in cases:
        v = parser(text)
        assert v.status is Status.INVALID and why in v.message, (text, v.message)


def test_clause_polarity_counts_negations_and_faults():
    """An odd number of negation and fault words turns the clause against its verdict; an even number does not."""
    assert parse_boxed_choice("The one without errors is \\boxed{A}").label == "A"  # two: positive
    assert parse_boxed_choice("The worse, wrong and flawed answer is \\boxed{B}").status is Status.INVALID  # three


def test_verdict_punctuation_and_math_formatting_are_read():
    """A full stop in any script ends the verdict's line; $...$ inside the box is formatting; other text glued to
    the box, or a box holding something other than a score, is no verdict."""
    assert parse_boxed_choice("最终判断：\\boxed{A}。").label == "A"
    assert parse_boxed_choice("最终判断：\\boxed{A}！").label == "A"
    assert parse_boxed_choice("\\boxed{$A$}").label == "A"
    assert parse_boxed_choice("\\boxed{A}X").status is Status.INVALID
    assert parse_boxed_score("\\boxed{1X}").status is Status.INVALID


def test_a_box_after_an_equals_sign_is_the_problems_answer_whatever_is_in_brackets_between():
    """Pointwise: "x = \\boxed{1}" boxes the problem's answer, not a score, also with a remark in brackets between."""
    assert parse_boxed_score("Thus x = \\boxed{1}").status is Status.INVALID
    assert parse_boxed_score("Thus x = (after simplifying) \\boxed{1}").status is Status.INVALID
    assert parse_boxed_score("Thus the response is right: \\boxed{1}").label == "1"


def test_a_verdict_is_a_short_token_and_a_word_in_a_box_spans_its_box():
    """A box holding more than a short token is no verdict (a score box of 100 zeros); a verdict word written in a
    box (``\\boxed{True}``, ``\\boxed{\\text{Answer 1}}``) is read as the whole box, so its place is the box's."""
    from rewardkit.prompts.jury import LLM_JUDGE_FORM
    from rewardkit.prompts.raro import CRITIC_FORM

    assert parse_boxed_score("\\boxed{" + "0" * 100 + "}").status is Status.INVALID
    assert parse_boxed_score("\\boxed{0.0000000000}").label == "0"
    for form, text in ((CRITIC_FORM, "Verdict: \\boxed{\\text{Answer 1}}"), (LLM_JUDGE_FORM, "Final: \\boxed{True}")):
        assert form.read(text).ok and form.verdict_start(text) == text.index("\\boxed")
    padded = "Final: \\boxed{" + " " * 70 + "True}"  # too long a box to be a token: the word is the verdict
    assert LLM_JUDGE_FORM.verdict_start(padded) == padded.index("True")


def test_a_later_text_that_takes_the_verdict_back_is_invalid():
    """Text after an end verdict that takes it back or doubts it, naming no other verdict, refuses it."""
    for parser, text in ((parse_boxed_choice, "\\boxed{A}\n\nActually, let me reconsider step 2."),
                         (parse_true_false, "Final judgment: True\n\nWait, step 3 needs another look.")):
        v = parser(text)
        assert v.status is Status.INVALID and "takes it back or hedges it (" in v.message, v.message


def test_a_cut_off_output_is_refused_with_the_reason_named():
    """A length stop and a <think> never closed are named as such (the module's two cut-off reasons), followed by the
    output's end; GAR's K cap before its explanation began says so."""
    assert parse_true_false("Final judgment: True", finish_reason="length").message == (
        "the judge stopped for length (finish_reason='length'): a cut-off output is no verdict "
        "in judge output (ends: 'Final judgment: True')")
    assert parse_true_false("<think>The sum in step 2 is").message == (
        "the judge's reasoning was cut off (<think> never closed): a cut-off output is no verdict "
        "in judge output (ends: '<think>The sum in step 2 is')")
    assert parse_yes_no("**YES**", finish_reason="length").message == (
        "the judge stopped for length (finish_reason='length') before its explanation began: the verdict may not be "
        "complete in judge output (ends: '**YES**')")
    # bold italics around GAR's verdict are formatting: the explanation after them had begun
    assert parse_yes_no("***YES***. The reasoning holds", finish_reason="length").label == "YES"


def test_think_unclosed_looks_at_the_last_think_block():
    """Reasoning is cut off when the last <think> opened after the last </think>, whatever came before it."""
    from rewardkit.verdict_forms import think_unclosed

    assert think_unclosed("<think>plan</think>\nDraft.\n<think>the sum in step 2 is")
    assert not think_unclosed("<think>plan</think>\nDraft.\n<think>check</think>\nFinal judgment: True")
    assert not think_unclosed("Final judgment: True")


def test_a_refusal_quotes_the_output_it_refuses():
    """Every refusal ends with the output's end, also those for text after the verdict that takes it back or argues."""
    for parser, text in ((parse_boxed_choice, "\\boxed{A}\n\nActually, let me reconsider step 2."),
                         (parse_true_false, "Final judgment: True\n\nThe proof is wrong.")):
        assert parser(text).message.endswith(f" in judge output (ends: {text.replace(chr(10), ' ')!r})")


def test_the_verdicts_a_refusal_names_are_joined_by_a_slash():
    """Several other verdicts named in a refusal are listed sorted and joined by '/' (docs/verdicts.md)."""
    v = parse_boxed_choice("\\boxed{A}\n\nNeither B nor a Tie would fit here.")
    assert "the text after the verdict A names another verdict (B/Tie) in judge output" in v.message
    v = parse_boxed_choice("First pick: \\boxed{Tie}\nSecond pick: \\boxed{A}\nMy verdict:\n\\boxed{B}")
    assert "the verdict B follows another verdict (A/Tie) that ends an earlier line" in v.message


def test_a_second_consistency_tag_right_after_the_first_is_a_second_verdict():
    """C.5 asks for exactly one tag: a disagreeing one glued to the first (broken over a line) is a second verdict."""
    from rewardkit.prompts.jury import CONSISTENCY_FORM

    v = CONSISTENCY_FORM.read("<consistency>Correct</consistency><consistency>\nIncorrect</consistency>")
    assert v.status is Status.INVALID and v.message.startswith("a second verdict (Incorrect) after the verdict Correct")


def test_long_clauses_are_quoted_by_their_last_60_characters():
    """The words that decided a refusal are quoted by their last 60 characters, those next to the verdict."""
    asked = "Looking again at the whole derivation from its very first line, is there an error?"
    assert f"answers a question the judge asked itself ({asked[-60:]!r})" in parse_yes_no(asked + " **YES**").message
    reason = "Since every one of the eleven steps might still hide a small slip somewhere,"
    assert (f"the reason given with the verdict True does not agree with it ({reason[-60:]!r})"
            in parse_true_false(reason + " True").message)
    clause = "Reading the response once more from its very first line to its end, the correct answer is"
    assert (f"the verdict's clause says the box holds something else ({clause[-60:]!r})"
            in parse_boxed_score(clause + " \\boxed{1}").message)


def test_words_bound_to_a_verdict_right_after_the_question_it_answers_are_read():
    """After the prompt's own question, the words before the verdict are its clause, also without a space after '?';
    a hedge word ending a reason before its comma counts."""
    assert "('No' in 'No:')" in parse_yes_no("Is the step sound?No: **YES**").message
    assert "does not agree with it ('Since I am unsure,')" in parse_true_false("Since I am unsure, True").message


def test_a_verdict_named_after_a_remark_in_brackets_is_a_second_one_on_the_line():
    """A lower-case verdict word right after a bracketed remark on the verdict's line is a second verdict."""
    v = parse_true_false("Final judgment: True (checked)false")
    assert v.message.startswith("two different verdicts on the verdict's line (True and False)")


def test_a_full_width_question_mark_after_the_verdict_is_no_separator():
    """A question mark (ASCII or full width) after the verdict leaves its line going on, as the '?' case shows."""
    assert parse_boxed_choice("\\boxed{A}<br>？").message.startswith("the verdict line goes on after the verdict ('？')")


def test_gar_quotes_its_explanations_first_sentence_from_its_first_word():
    """The quoted first sentence starts at its first word, an X included (only separators are stripped)."""
    assert "('XOR of the bits in step 2 is wrong.')" in parse_yes_no("**YES**. XOR of the bits in step 2 is wrong.").message


def test_boxed_choices_with_spaces_or_a_response_prefix_are_read():
    """Box contents are read with case and spaces ignored and a leading "Response" allowed (choice_canon)."""
    assert parse_boxed_choice("\\boxed{Response A}").label == "A"
    assert parse_boxed_choice("Final verdict: \\boxed{response b}").label == "B"
    assert parse_boxed_choice("\\boxed{Answer 1}", choices=("Answer 1", "Answer 2")).label == "Answer 1"
    assert parse_boxed_choice("\\boxed{answer2}", choices=("Answer 1", "Answer 2")).label == "Answer 2"


def test_a_later_box_that_is_no_choice_leaves_the_verdict():
    """A box after the verdict holding something else (a number) names no verdict."""
    assert parse_boxed_choice("\\boxed{A}\n\nIts final answer \\boxed{12} is right.").label == "A"


def test_a_box_exactly_max_len_long_is_kept():
    """``max_len`` is the longest content kept: one of exactly that length is kept (a 64-character score too)."""
    assert boxed_contents("\\boxed{1234} \\boxed{12345}", max_len=4) == ["1234"]
    assert parse_boxed_score("\\boxed{0." + "0" * 62 + "}").label == "0"
    assert parse_boxed_score("\\boxed{0." + "0" * 63 + "}").status is Status.INVALID


def test_later_verdicts_of_a_first_place_form_are_named_joined_by_a_slash():
    """A form that reads its first verdict names every later, different one, sorted and joined by '/'."""
    from rewardkit.verdict_forms import VerdictForm, box_hits, choice_canon

    form = VerdictForm("first boxed A/B/C", box_hits(choice_canon(("A", "B", "C"))), "first",
                       tokens=("\\boxed{A}", "\\boxed{B}", "\\boxed{C}"), choices=("A", "B", "C"))
    v = form.read("\\boxed{A}\n\nOn second look: \\boxed{C}\n\nOr: \\boxed{B}")
    assert v.message.startswith("a second verdict (B/C) after the verdict A in judge output")


def test_gar_bold_words_sharing_their_asterisks_are_two_verdicts():
    """Overlapping bold markup holds both words, after the verdict as before it: "**NO** YES**" is no clear NO."""
    assert parse_yes_no("**YES**NO**").status is Status.INVALID
    v = parse_yes_no("**NO** YES**")
    assert v.status is Status.INVALID and v.message.startswith("a second verdict (YES) after the verdict NO"), v.message


def test_a_negative_verdict_called_right_without_a_fault_argues_the_other_way():
    """A 0 / False whose remark calls the answer right, its faults denied in pairs ("no errors"), argues the other way,
    after the verdict on its line or below it."""
    v = parse_true_false("Final judgment: False\n\nThe answer is correct: no step of its derivation is wrong.")
    assert v.message.startswith("the text after the verdict False argues the other way"), v.message
    v = parse_boxed_score("Score: \\boxed{0}. The response is correct.")
    assert v.message.startswith("what follows the verdict on its line does not agree with it: it argues the other way")
