"""Judge-output parsing: each prompt's verdict read where and in the form that prompt asks for it.

One rule for every parser (docs/verdicts.md), after issue 34: a verdict is read at its prompt's place, in its
prompt's form (a ``VerdictForm``, declared beside its template in ``rewardkit/prompts/<paper>.py``), whatever
reasoning, formatting or label surrounds it; it is ``Status.INVALID`` only where a reader could not be sure of it.

- Where. Reasoning Arena (tournament, pointwise, RLAIF rubric): the final ``\\boxed{}`` of the reply. GAR's
  discriminator: the first bold ``**YES**``/``**NO**`` (the brief analysis before it, a rationale after it, as in
  GAR Tables 2, 10, 11). JURY-RL's judge: the final ``True``/``False``; its consistency checker: the
  ``<consistency>`` tag. RARO's critics: the final line naming ``Answer 1``/``Answer 2``/``tie`` (``Poem 1/2`` as
  in App. E Fig. 20) or ``Expert``/``Policy``. Only text after the last ``</think>`` is read.
- Around it, all fine: reasoning before it on its line ("... Therefore, Response A is better.  $\\boxed{A}$"),
  any label in any language ("Final Judgement:", "最终判断：", "Veredicto:"), markdown, ``$...$``, ``\\[...\\]``,
  ``\\text{}``, HTML tags, trailing punctuation, a positive predicate ("Answer 2 is better."), and text after
  it that names no other verdict and takes nothing back.
- Invalid, never a flip: two different verdicts on the verdict's line ("\\boxed{A}, \\boxed{B}, or \\boxed{Tie}");
  a negation, hedge or comparison bound to it ("not \\boxed{B}", "probably True", "better than Answer 2"); a
  question it answers ("Is there an error? **YES**"); a clause naming it the loser or a fault ("Worse answer:
  Answer 2", "Incorrect answer: \\boxed{A}", "Answer 1 loses."); a later text that names another verdict or takes
  it back ("True\\n\\nNote: this might be False"); for GAR (whose verdict comes first) a later, different verdict;
  a cut-off reply (``finish_reason="length"``, or a ``<think>`` never closed), except GAR's K = 128 cap, which
  "preserv[es] the verdict and truncat[es] any justification beyond that limit" (Sec. 4.3).

Parsers never raise; an invalid verdict carries a message saying why and showing the end of the output (its last
120 characters, on one line; ``<empty>`` for an empty output).

    >>> parse_boxed_choice("Response B omits a step. Therefore, Response A is better.  $\\\\boxed{A}$").label
    'A'
    >>> parse_yes_no("... leading to a contradiction.</u>  **YES**</p> <p>The reasoning is rigorous.</p>").label
    'YES'
    >>> parse_answer_choice("<think>...</think>\\nFinal Judgment:\\nPoem 2").label, parse_true_false("Final judgment: False.").label
    ('2', 'False')
    >>> parse_expert_policy("Reads like a textbook.\\nExpert").label, parse_boxed_score(r"Score: \\boxed{0.5}").label
    ('Expert', '0.5')
    >>> parse_consistency("<consistency>Correct</consistency>").label
    'Correct'
    >>> parse_boxed_choice(r"Worse answer: \\boxed{B}").status, parse_yes_no("Is there an error? **YES**").status
    (<Status.INVALID: 'invalid'>, <Status.INVALID: 'invalid'>)
"""

from __future__ import annotations

from collections.abc import Sequence

from rewardkit.prompts.arena import POINTWISE_FORM, TOURNAMENT_FORM, boxed_choice_form
from rewardkit.prompts.gar import DISCRIMINATOR_FORM
from rewardkit.prompts.jury import CONSISTENCY_FORM, LLM_JUDGE_FORM
from rewardkit.prompts.raro import BINARY_CRITIC_FORM, CRITIC_FORM
from rewardkit.verdict_forms import Verdict, VerdictForm, boxed_contents, boxed_spans, response_trunk

# Each form is declared beside its prompt (rewardkit/prompts/<paper>.py); these are the named entry points.

def parse_boxed_choice(text: str, choices: Sequence[str] = ("A", "B", "Tie"), finish_reason: str | None = None) -> Verdict:
    """Reasoning Arena App. D tournament: the final ``\\boxed{X}``, X one of ``choices`` (case-insensitive)."""
    form = TOURNAMENT_FORM if tuple(choices) == TOURNAMENT_FORM.choices else boxed_choice_form(choices)
    return form.read(text, finish_reason)


def parse_boxed_score(text: str, finish_reason: str | None = None) -> Verdict:
    """Reasoning Arena App. D pointwise / RLAIF rubric: the final ``\\boxed{1}``, ``\\boxed{0.5}`` or
    ``\\boxed{0}`` (any number equal to one of them: ``\\boxed{0.50}`` is 0.5)."""
    return POINTWISE_FORM.read(text, finish_reason)


def parse_yes_no(text: str, finish_reason: str | None = None) -> Verdict:
    """GAR discriminator (App. B; Tables 2, 10, 11): the first ``**YES**`` or ``**NO**``, after the brief analysis
    and before the rationale ("**NO** -- Not high quality" is NO); a later, different one is a second verdict."""
    return DISCRIMINATOR_FORM.read(text, finish_reason)


def parse_answer_choice(text: str, finish_reason: str | None = None) -> Verdict:
    """RARO critic (App. E): the final line naming ``Answer 1``, ``Answer 2`` or ``tie`` (``Poem 1/2``, Fig. 20)."""
    return CRITIC_FORM.read(text, finish_reason)


def parse_expert_policy(text: str, finish_reason: str | None = None) -> Verdict:
    """RARO binary critic (Sec. 3.2): the final line naming ``Expert`` or ``Policy``."""
    return BINARY_CRITIC_FORM.read(text, finish_reason)


def parse_true_false(text: str, finish_reason: str | None = None) -> Verdict:
    """JURY-RL App. D judge: the final ``True`` or ``False`` ("end your response with your final judgment")."""
    return LLM_JUDGE_FORM.read(text, finish_reason)


def parse_consistency(text: str, finish_reason: str | None = None) -> Verdict:
    """JURY-RL C.5 consistency checker: the ``<consistency>Correct|Incorrect</consistency>`` tag; a later tag
    that disagrees is a second verdict (the prompt asks for exactly one)."""
    return CONSISTENCY_FORM.read(text, finish_reason)


PARSERS = {
    "ab_tie": parse_boxed_choice,
    "score": parse_boxed_score,
    "yes_no": parse_yes_no,
    "answer_choice": parse_answer_choice,
    "expert_policy": parse_expert_policy,
    "true_false": parse_true_false,
    "consistency": parse_consistency,
}

__all__ = ["PARSERS", "Verdict", "VerdictForm", "boxed_contents", "boxed_spans", "parse_answer_choice",
           "parse_boxed_choice", "parse_boxed_score", "parse_consistency", "parse_expert_policy", "parse_true_false",
           "parse_yes_no", "response_trunk"]
