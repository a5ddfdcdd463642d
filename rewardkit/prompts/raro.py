"""RARO critic prompts (App. E, "Countdown/DeepMath Critic Input").

The paper prints the critic input with its instructions elided ("..."): the first sentence and the
Question / Answer 1 / Answer 2 layout below are the paper's; the instruction paragraph in between is ours,
written to ask for the paper's output format (reasoning, then ``Answer 1``, ``Answer 2`` or ``tie``),
which :func:`rewardkit.verdicts.parse_answer_choice` reads.
"""

from __future__ import annotations

from rewardkit.prompts import get_prompt, render

# The math opening sentence is verbatim from App. E (Figures 18-19); the general one is our adaptation
# for non-math questions (the paper's poetry critic, Figure 20, answers "Poem 1/2", another format).
MATH_CRITIC_INTRO = (
    "You are an expert mathematics critic whose goal is to compare two answers to a math problem and "
    "determine which one is correct."
)
GENERAL_CRITIC_INTRO = (
    "You are an expert critic whose goal is to compare two answers to the same question and determine "
    "which one is better."
)

# Ours (the paper elides this part): states the three allowed verdicts and where to put the verdict.
CRITIC_INSTRUCTIONS = (
    "Think step by step about both answers, checking each one carefully. Then, on the last line, write "
    "exactly one verdict: \"Answer 1\" if the first answer is better, \"Answer 2\" if the second answer "
    "is better, or \"tie\" if they are equally good (for example, both correct or both wrong)."
)

# Verbatim layout of the paper's critic input.
CRITIC_BODY = (
    "Question:\n<question>\n{question}\n</question>\n\n"
    "Answer 1:\n<answer_1>\n{answer_1}\n</answer_1>\n\n"
    "Answer 2:\n<answer_2>\n{answer_2}\n</answer_2>"
)

INTROS = {"math": "raro.math_critic_intro", "general": "raro.general_critic_intro"}  # template -> prompt name

# Verdict-logit mode: the assistant turn starts with this prefix and the three verdicts are scored.
# The App. E critic responses end with "</think>\nAnswer 1" (math) or "Final Judgment:\nPoem 2" (poetry).
# The choices differ in their first token so one forward pass scores all three ("Answer 1" / "Answer 2"
# would share "Answer" and need a pass per choice); they map to Answer 1, Answer 2 and tie in order.
VERDICT_PREFIX = "Final Judgment (1, 2 or tie): "
VERDICT_CHOICES = ("1", "2", "tie")

def critic_user_prompt(question: str, answer_1: str, answer_2: str, template: str = "math") -> str:
    """The full critic input for one (question, answer 1, answer 2) triple."""
    if template not in INTROS:
        raise ValueError(f"unknown RARO critic template {template!r}; known: {sorted(INTROS)}")
    body = render("raro.critic_body", question=question.strip(), answer_1=answer_1.strip(), answer_2=answer_2.strip())
    return f"{get_prompt(INTROS[template]).text}\n\n{get_prompt('raro.critic_instructions').text}\n\n{body}"
