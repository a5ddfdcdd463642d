"""JURY-RL prompts, verbatim from App. C.5 (autoformaliser, consistency checker, prover) and App. D
(LLM-as-a-Judge). Placeholders use ``str.format`` names; literal braces are doubled."""

import re

from rewardkit.verdict_forms import VerdictForm, word_hits

AUTOFORMALIZER = (
    "Please autoformalize the following natural language problem statement in Lean 4.\n"
    "Use the following theorem name: {theorem_name}\n"
    "The natural language statement is:\n"
    "{informal_statement_content}.\n"
    "Think before you provide the lean statement."
)

CONSISTENCY_SYSTEM = """Your role is a Lean4 expert, please help me check consistency between natural language expression and its Lean4 proof statement.
Guidelines for Consistency Checking:
Goal:
Determine if the Lean theorem statement is an exact and faithful formalization of the mathematical problem.
Do not evaluate or consider the answer or the proof. Your sole task is to verify the correctness of the formalization.
Evaluation Stages (All required):
1. Math Assertion Analysis
Identify all structurally and semantically relevant components of the mathematical problem, including variables, types, quantifiers, constraints, logic structure, conclusion, and so on. The analysis should be based on the actual content of the text.
2. Lean Statement Analysis (ignore proof part)
Extract all structurally and semantically relevant components from the Lean statement, including variables, types, conditions, quantifiers, constraints, the final claim, and so on. The analysis should reflect the actual content present in the Lean code.
3. Comparative Verification

Check for exact correspondence between the math and Lean statements; you may refer to aspects like:

- Semantic alignment, logic structure, and quantifier correctness.
- Preservation of constraints and boundary assumptions.
- Accurate typing and use of variables.
- Syntactic validity and proper Lean usage (free from errors).
- Use of symbols and constructs without semantic drift.
- No missing elements, no unjustified additions, and no automatic corrections or completions.

4. Final Judgement

Based solely on the above analysis, judge whether the Lean statement is a correct and exact formalization of the mathematical problem.

5. Accuracy Confirmation

If correct: clearly confirm why all elements match.

If incorrect: list all mismatches and explain how each one affects correctness.

Note: While the analysis may be broad and open to interpreting all relevant features, the final judgment must be based only on what is explicitly and formally expressed in the Lean statement.

**Do not consider or assess any part of the proof. Your judgment should be entirely about the accuracy of the statement formalization.**

You should present the results following the format:

Input:

The Natural Language Statement:
A math problem and its answer (no proof).

The Formal Statement in Lean4:
```lean
A Lean 4 theorem statement formalizing the problem. Proof is intentionally omitted (e.g., sorry).
```

Output Format:

Return exactly one xml object

```
<comments>
Your brief analysis:
Math Assertion Analysis: [...]
Lean Statement Analysis (Proof Ignored): [...]
Comparative Verification: [...]
Conclusion: [...]
Accuracy Confirmation: [...] match confirmation or list of discrepancies. ...
</comments>
<consistency>[Correct/Incorrect]</consistency>
```"""

CONSISTENCY_USER = """Input Data:

The Natural Language Statement:
{informal_prefix}

The Formal Statement in Lean4:
```lean
{formal_statement}
```"""

PROVER = """Complete the following Lean 4 code:

```lean4
{formal_statement}
```

Before producing the Lean 4 code to formally prove the given theorem, provide a detailed proof plan outlining the main proof steps and strategies.

The plan should highlight key ideas, intermediate lemmas, and proof structures that will guide the construction of the final formal proof."""

LLM_JUDGE_SYSTEM = (
    "You are a professional math QA pair evaluator. Your sole task is to determine whether a given "
    "mathematical question and answer are correctly matched. First explain your reasoning, then end your "
    "response with your final judgment: True or False."
)

# Not given in the paper: how the QA pair is laid out for the roles above (our choice, kept minimal).
INFORMAL_QA = "{problem}\nThe answer is {answer}"
LLM_JUDGE_USER = "Question: {problem}\nAnswer: {answer}"


def _stated(m: re.Match) -> str | None:
    """A True / False verdict: capitalised as the prompt writes it, or lower case alone or after a label ("final
    judgment: true"); "... which is true." in prose is no verdict."""
    lead = m.string[m.string.rfind("\n", 0, m.start()) + 1:m.start()]
    if m.group(1)[0].isupper() or re.search(r"[:：][\W_]*$", lead) or not re.search(r"\w", lead):
        return m.group(1).capitalize()
    return None


# The verdict forms (docs/verdicts.md). App. D: the final True / False, reasoning or a label before it
# (App. H's judge ends "Final judgment: False."; C.5 spells it "Final Judgement"); ``polar``: the words of the prompt's
# question ("whether a given mathematical question and answer are correctly matched"). C.5: the <consistency> tag.
LLM_JUDGE_FORM = VerdictForm("True/False", word_hits(re.compile(r"\b(true|false)\b", re.IGNORECASE), _stated), "end",
                             tokens=("True", "False"), prefix="Final judgment: ", choices=("True", "False"),
                             polar=re.compile(r"\b(?:correct(?:ly)?|match(?:ed|es)?|right|valid|true)\b", re.I))
CONSISTENCY_FORM = VerdictForm(
    "<consistency>", word_hits(re.compile(r"<consistency>\s*\[?\s*(correct|incorrect)\s*\]?\s*</consistency>", re.I),
                               lambda m: m.group(1).capitalize()),
    "first", tokens=("<consistency>", "Correct", "Incorrect"))
JUDGE_FORMS = {"jury.llm_judge_system": LLM_JUDGE_FORM, "jury.consistency_system": CONSISTENCY_FORM}
