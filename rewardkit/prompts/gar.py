"""GAR prompts (Generative Adversarial Reasoner, App. B), verbatim where the paper gives them."""

from __future__ import annotations

import re

from rewardkit.prompts import get_prompt, render
from rewardkit.verdict_forms import VerdictForm, word_hits

# App. B, "System prompt for the LLM reasoner" (verbatim; "\n" are literal newlines in the format line).
REASONER_SYSTEM = (
    "You are a helpful AI Assistant that provides well-reasoned and detailed responses. You first think "
    "about the reasoning process as an internal monologue and then provide the user with the answer. "
    "Respond in the following format:<think>\n...\n</think>\n<answer>\n...\n</answer>"
)

# App. B, "System prompt for the LLM discriminator" (verbatim).
DISCRIMINATOR_SYSTEM = (
    "You are an evaluator responsible for assessing whether a reasoning / thinking process is reasonable, "
    "rigorous, and accurate. Based on these criteria, determine if the analysis is of high quality. First, "
    "analyze the reasoning very briefly, then respond with '**YES**' for high quality or '**NO**' if it is "
    "not. Finally, provide a brief but specific explanation for your judgment. Hint: You can first summarize "
    "the given thinking process to identify the main reasoning chain, then analyze the reasoning chain "
    "sentence by sentence."
)

# The paper prints no user turn: this one (ours) only lays out the problem, optional earlier reasoning as context,
# and the slice to judge; the output format is the system prompt's alone, as in App. B.
DISCRIMINATOR_USER = """Problem:
{problem}
{context}
Reasoning to evaluate:
{slice}"""

CONTEXT_BLOCK = """
Earlier reasoning (context only, do not judge it):
{context}
"""

# Verdict-logit mode: no analysis; the assistant turn starts with "**" and we read P(YES) vs P(NO).
VERDICT_PREFIX = "**"
VERDICT_CHOICES = ("YES", "NO")

# The verdict form (docs/verdicts.md): the first bold **YES** / **NO** after the brief analysis, on its line or not
# (Table 10: "... leading to a contradiction.</u>  **YES**</p> <p>..."), the rationale after it. A lookahead finds
# overlapping hits, so "**YES**NO**" holds both words (a conflict); a period or "!" may sit inside the bold. ``polar``:
# the words of the prompt's question ("reasonable, rigorous, and accurate ... high quality").
DISCRIMINATOR_FORM = VerdictForm(
    "**YES**/**NO**", word_hits(re.compile(r"(?=(\*\*[ \t]*(YES|NO)[ \t]*[.!]?[ \t]*\*\*))", re.IGNORECASE),
                                lambda m: m.group(2).upper()),
    "first", tokens=("**YES**", "**NO**"), prefix=VERDICT_PREFIX, choices=VERDICT_CHOICES, explained=True,
    polar=re.compile(r"\b(?:reasonable|rigorous|accurate|high[- ]quality|sound|correct|valid|right)\b", re.I))
JUDGE_FORMS = {"gar.discriminator_system": DISCRIMINATOR_FORM}  # template name -> the form it asks for


def discriminator_messages(problem: str, slice_text: str, context: str = "") -> list[dict[str, str]]:
    """Chat messages asking the App. B discriminator to judge one slice (with optional earlier context)."""
    ctx = render("gar.context_block", context=context.strip()) if context.strip() else ""
    user = render("gar.discriminator_user", problem=problem.strip(), context=ctx, slice=slice_text.strip())
    return [{"role": "system", "content": get_prompt("gar.discriminator_system").text},
            {"role": "user", "content": user}]
