"""GAR prompts (Generative Adversarial Reasoner, App. B), verbatim where the paper gives them."""

from __future__ import annotations

from rewardkit.prompts import get_prompt, render

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

# The paper does not print its user turn; this one gives the problem, optional earlier reasoning as
# context, and the slice to judge, and restates the output format, asking for the verdict where the one
# verdict rule reads it (docs/verdicts.md: a verdict after analysis on the same line is invalid).
DISCRIMINATOR_USER = """Problem:
{problem}
{context}
Reasoning to evaluate:
{slice}

Analyze this reasoning very briefly, then answer **YES** or **NO** at the start of a line of its own, then give a short rationale."""

CONTEXT_BLOCK = """
Earlier reasoning (context only, do not judge it):
{context}
"""

# Verdict-logit mode: no analysis; the assistant turn starts with "**" and we read P(YES) vs P(NO).
VERDICT_PREFIX = "**"
VERDICT_CHOICES = ("YES", "NO")


def discriminator_messages(problem: str, slice_text: str, context: str = "") -> list[dict[str, str]]:
    """Chat messages asking the App. B discriminator to judge one slice (with optional earlier context)."""
    ctx = render("gar.context_block", context=context.strip()) if context.strip() else ""
    user = render("gar.discriminator_user", problem=problem.strip(), context=ctx, slice=slice_text.strip())
    return [{"role": "system", "content": get_prompt("gar.discriminator_system").text},
            {"role": "user", "content": user}]
