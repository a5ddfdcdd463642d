"""lm-eval 0.4 hooks for the rewardkit task configs: grade a generation with rewardkit's answer verifier
(last ``\\boxed{}`` / "the answer is" / last number, math-verify equivalence with the gold answer first)."""

from rewardkit.answers import equivalent, extract_answer


def process_results(doc: dict, results: list[str]) -> dict[str, float]:
    """exact_match = 1 when the extracted answer is equivalent to ``doc["answer"]`` (a timeout counts 0)."""
    return {"exact_match": float(bool(equivalent(str(doc["answer"]), extract_answer(results[0]))))}
