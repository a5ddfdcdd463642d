"""Reasoning Arena judge prompts, verbatim from App. D (tournament, adaptive pointwise, RLAIF rubric)."""

from __future__ import annotations

import re

from rewardkit.prompts import render
from rewardkit.types import reference_text
from rewardkit.verdict_forms import (
    PROBLEM_ANSWER,
    REFERENCE_ANSWER,
    VerdictForm,
    box_hits,
    choice_canon,
    choice_mentions,
    score_label,
)

# App. D, "Tournament prompt for pairwise preference (REASONING ARENA)"
TOURNAMENT = """Compare the two solution attempts below and decide which is better.

[PROBLEM]
{problem}

[REFERENCE ANSWER]
The correct answer is: {final_answer}

[RESPONSE A]
{response_a}

[RESPONSE B]
{response_b}

Which response is better? Compare the final answers and reasoning quality. Your response MUST end with exactly one of: \\boxed{{A}}, \\boxed{{B}}, or \\boxed{{Tie}}.

Keep your analysis under 500 words to ensure you have space for the final verdict."""

# App. D, "Pointwise prompt (Adaptive Pointwise)"
POINTWISE = """Evaluate the model response to the following math question. Score it as 1 (completely correct), 0.5 (minor errors), or 0 (incorrect/fatal errors). Your response MUST end with exactly one of: \\boxed{{1}}, \\boxed{{0.5}}, or \\boxed{{0}}.

[PROBLEM]
{problem}

[REFERENCE ANSWER]
The correct answer is: {final_answer}

[RESPONSE]
{response}"""

# App. D, "Pointwise and DeepSeekMath-style rubric (RLAIF)"
RLAIF_RUBRIC = """Please evaluate the quality of the model response to a math problem. The response may require a rigorous proof or a final numerical/symbolic answer. If the response provides an answer, it should also include a valid proof or derivation demonstrating why the answer is correct.

Scoring criteria:
- Score 1: The response is completely correct, with all steps executed properly and clearly demonstrated.
- Score 0.5: The response is generally correct, but with some details omitted or minor errors that do not invalidate the overall approach.
- Score 0: The response does not actually address the required problem, contains fatal errors, or has severe omissions that undermine its validity.

[PROBLEM]
{problem}

[REFERENCE ANSWER]
The correct answer is: {final_answer}

[RESPONSE]
{response}

Begin with "Here is my evaluation of the response:" and provide a detailed analysis of the key steps. Then conclude with "Based on my evaluation, the final overall score should be:" followed by exactly one of: \\boxed{{1}}, \\boxed{{0.5}}, or \\boxed{{0}}."""

POINTWISE_PROMPTS = {"adaptive": "arena.pointwise", "rlaif": "arena.rlaif_rubric"}  # rubric -> prompt name

# Assistant-turn prefixes for verdict-logit mode: the judge's probability of each choice right after "\boxed{".
TOURNAMENT_VERDICT_PREFIX = "Final verdict: \\boxed{"
POINTWISE_VERDICT_PREFIX = "Based on my evaluation, the final overall score should be: \\boxed{"



def boxed_choice_form(choices: tuple[str, ...] | list[str]) -> VerdictForm:
    """The tournament's verdict form for ``choices``: the final ``\\boxed{X}`` of the reply (App. D "MUST end
    with exactly one of"; App. C's judge ends "... Therefore, Response A is better.  $\\boxed{A}$")."""
    choices = tuple(choices)
    return VerdictForm("boxed " + "/".join(choices), box_hits(choice_canon(choices)), "end",
                       tokens=[f"\\boxed{{{c}}}" for c in choices], prefix=TOURNAMENT_VERDICT_PREFIX, choices=choices,
                       mentions=choice_mentions(choices), not_after=REFERENCE_ANSWER)


# The verdict forms, beside their templates (docs/verdicts.md): the final box, any reasoning before it on its line;
# a score is right or wrong (``polar``: 1 is the right one, the words of the prompt's own question).
TOURNAMENT_FORM = boxed_choice_form(("A", "B", "Tie"))
POINTWISE_FORM = VerdictForm("boxed 1/0.5/0", box_hits(score_label), "end",
                             tokens=("\\boxed{1}", "\\boxed{0.5}", "\\boxed{0}"), prefix=POINTWISE_VERDICT_PREFIX,
                             choices=("1", "0.5", "0"), not_after=PROBLEM_ANSWER,
                             polar=re.compile(r"\b(?:correct|right|valid|accurate|complete)\b", re.IGNORECASE))
JUDGE_FORMS = {"arena.tournament": TOURNAMENT_FORM, "arena.pointwise": POINTWISE_FORM,
               "arena.rlaif_rubric": POINTWISE_FORM}  # template name -> the form it asks for

NO_REFERENCE = "(not provided)"


def _final_answer(reference: str | tuple[str, ...] | None) -> str:
    """The prompt's final-answer slot: the reference, several as "any one of these ...", or NO_REFERENCE."""
    return NO_REFERENCE if reference is None else reference_text(reference)  # type: ignore[return-value]


def tournament_prompt(problem: str, reference: str | tuple[str, ...] | None, response_a: str, response_b: str) -> str:
    """The App. D tournament prompt for one ordered pair (A is shown first)."""
    return render("arena.tournament", problem=problem, response_a=response_a, response_b=response_b,
                  final_answer=_final_answer(reference))


def pointwise_prompt(problem: str, reference: str | tuple[str, ...] | None, response: str,
                     rubric: str = "adaptive") -> str:
    """The App. D pointwise prompt (``rubric="adaptive"``) or the RLAIF DeepSeekMath-style rubric (``"rlaif"``)."""
    if rubric not in POINTWISE_PROMPTS:
        raise ValueError(f"arena prompts: unknown rubric {rubric!r}; known: {sorted(POINTWISE_PROMPTS)}")
    return render(POINTWISE_PROMPTS[rubric], problem=problem, response=response,
                  final_answer=_final_answer(reference))
