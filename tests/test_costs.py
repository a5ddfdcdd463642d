"""Cost fields mean the same thing in every scorer: one input through all of them, counted independently.

``judge_calls`` = backend requests executed (the scripted judge records each one), ``verifier_calls`` =
answer/claim checks actually run, ``cache_hits`` = answers served from a cache (a second pass over the
same input runs no check again).
"""

import numpy as np
import pytest

from rewardkit.scoring import get_scorer
from rewardkit.testing import ScriptedJudge
from rewardkit.types import Group

N = 4
# (scorer, options, answer checks it needs for one group of N responses: per response, or one claim)
CASES = [
    ("verifier", {}, N),
    ("arena", {"mode": "logit"}, N),
    ("tournament", {"mode": "logit"}, N),
    ("pointwise", {"mode": "logit"}, N),
    ("adaptive-pointwise", {"mode": "logit"}, N),
    ("slices", {"mode": "logit"}, N),
    ("critic", {"mode": "logit"}, 0),
    ("llm-judge", {"mode": "logit"}, 0),
    ("proof-gate", {"verifier": "reference"}, 1),  # the majority answer, verified once (eq. 4)
    ("majority-vote", {}, 0),
]


def _group(tag: str) -> Group:
    # four spellings of the right answer: distinct checks, one majority answer, and a group that is not
    # reward-diverse, so arena and adaptive-pointwise route it to the judge
    answers = [tag, f"{tag}.0", f"{tag}.00", f"\\frac{{{2 * int(tag)}}}{{2}}"]
    return Group(f"cost-{tag}", f"What is {tag} + 0?", [f"so \\boxed{{{a}}}" for a in answers],
                 reference=tag, expert=f"{tag} + 0 = \\boxed{{{tag}}}")


@pytest.mark.parametrize(("name", "options", "checks"), CASES, ids=[c[0] for c in CASES])
def test_the_same_input_gives_comparable_costs(name, options, checks):
    judge = ScriptedJudge(probs=lambda prompt, choices: np.full(len(choices), 1 / len(choices)))
    opts = {**options, "judge": judge} if name not in ("verifier", "majority-vote", "proof-gate") else options
    scorer = get_scorer(name, **opts)
    g = _group(f"{1000 + CASES.index((name, options, checks))}")  # an answer no other test has cached
    (first,) = scorer.score([g])
    c = first.cost
    assert c.judge_calls == len(judge.requests), "judge_calls = backend requests executed"
    assert c.prompt_tokens == judge.prompt_tokens * len(judge.requests)
    assert (c.verifier_calls, c.cache_hits) == (checks, 0), "a first pass runs every check"
    if name in ("tournament", "pointwise", "adaptive-pointwise", "arena", "slices", "critic", "llm-judge"):
        assert c.judge_calls > 0
    (again,) = scorer.score([g])
    assert (again.cost.verifier_calls, again.cost.cache_hits) == (0, checks), "a repeat is served from the cache"
    assert all(len(v) == N for v in first.components.values()), "components hold per-response arrays only"
