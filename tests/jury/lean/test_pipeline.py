"""The App. C pipeline (autoformalise -> consistency -> prove -> Lean) on a scripted backend and the
stand-in `lean`; the LLM-as-a-judge verifier; one real-model run of each (mechanics only)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rewardkit.jury.lean.cache import VerificationCache
from rewardkit.jury.lean.check import DEFAULT_HEADER
from rewardkit.jury.lean.pipeline import LeanVerifier, extract_lean, formal_statement, parse_consistency
from rewardkit.jury.lean.subprocess import LeanSubprocess
from rewardkit.jury.proof_gate import (
    Claim,
    LLMJudgeScorer,
    LLMJudgeVerifier,
    ProofGateScorer,
    parse_true_false,
)
from rewardkit.prompts import jury as P
from rewardkit.testing import ScriptedJudge
from rewardkit.types import Group, Status

LEAN = str(Path(__file__).resolve().parents[2] / "lean_standins" / "lean")
STMT = "theorem test_problem (x : ℕ) (h : x + 2 = 5) : x = {ans}"


def fence(code: str) -> str:
    return f"Let me think.\n```lean4\n{code}\n```\n"


def _role(prompt: str) -> str:
    if prompt.startswith("Input Data:"):
        return "consistency"
    return "formalise" if "autoformalize" in prompt else "prove"


def Scripted(proofs=("  sorry", "  omega")) -> ScriptedJudge:  # noqa: N802 - reads like the class it replaces
    """Scripted judge for the three LLM roles, answering from the prompt (up to 16 samples per request)."""

    def reply(text: str) -> list[str]:
        role = _role(text)
        if role == "formalise":
            ans = text.split("The answer is ")[1].split(".\n")[0].strip()
            return ["no code here", fence(STMT.format(ans=ans) + " := by\n  sorry")] + [fence("theorem other : True := trivial")] * 14
        if role == "consistency":
            return ["<comments>fine</comments>\n<consistency>" + ("Correct" if "x = 3" in text else "Incorrect") + "</consistency>"]
        stmt = text.split("```lean4\n")[1].split(" := by")[0]
        stmt = stmt[stmt.index("theorem"):]
        return [fence(stmt + " := by\n" + proofs[i % len(proofs)]) for i in range(16)]

    return ScriptedJudge(reply, [0.9, 0.1])


def calls(judge: ScriptedJudge) -> list[tuple[str, list]]:
    """Each backend call of the scripted judge as (role, its requests)."""
    out, i = [], 0
    for _, n in judge.batches:
        reqs = judge.requests[i:i + n]
        i += n
        out.append((_role(reqs[0].messages[-1]["content"]), reqs))
    return out


def test_prompts_are_the_papers():
    assert P.AUTOFORMALIZER.startswith("Please autoformalize the following natural language problem statement in Lean 4.")
    assert "<consistency>[Correct/Incorrect]</consistency>" in P.CONSISTENCY_SYSTEM
    assert P.PROVER.startswith("Complete the following Lean 4 code:\n\n```lean4\n{formal_statement}\n```")
    assert P.LLM_JUDGE_SYSTEM.endswith("your final judgment: True or False.")


def test_parsers():
    assert parse_consistency("<consistency>Incorrect</consistency>").label == "Incorrect"
    assert parse_consistency("<comments>x</comments>\n<consistency>[Correct]</consistency>").label == "Correct"
    assert parse_consistency("x <consistency>[Correct]</consistency>").label == "Correct"  # text before it: fine (issue 34)
    assert parse_consistency("not <consistency>[Correct]</consistency>").status is Status.INVALID  # negated
    assert parse_consistency("Correct").status is Status.INVALID
    assert parse_true_false("It does not match.\nFinal judgment: False.").label == "False"
    assert parse_true_false("no idea").status is Status.INVALID
    assert extract_lean("```lean\ntheorem test_problem : True := trivial\n```") == "theorem test_problem : True := trivial\n"
    f = formal_statement(fence(STMT.format(ans=3) + " := by\n  simp"))
    assert f.startswith(DEFAULT_HEADER) and f.endswith(":= by\n  sorry\n")


def test_pipeline_verifies_batched_and_stops_at_first_success(tmp_path):
    backend = Scripted(proofs=("  sorry", "  omega"))
    ver = LeanVerifier(backend, LeanSubprocess(LEAN), k_formal=3, k_prove=8, attempts_per_round=2,
                       cache=VerificationCache(tmp_path / "c.sqlite"))
    claims = [Claim("If x + 2 = 5, what is x?", "3"), Claim("If x + 2 = 5, what is x?", "4")]
    good, wrong = ver.verify_many(claims)
    assert good.outcome == "verified" and "omega" in good.detail["proof"]
    assert good.detail["attempts"] == 2  # first round: sorry rejected, omega accepted -> stop
    assert wrong.outcome == "inconclusive" and "consistency" in wrong.reason  # the checker said Incorrect
    roles = [r for r, _ in calls(backend)]
    assert roles == ["formalise", "consistency", "prove"]  # one batched call per stage
    assert [len(reqs) for _, reqs in calls(backend)] == [2, 2, 1]
    assert good.cost.judge_calls == 3 and good.cost.verifier_calls == 1 + 2  # statement check + 2 proofs
    # second time: from the persistent cache, no model or Lean work
    again = ver.verify_many(claims)
    assert [r.outcome for r in again] == ["verified", "inconclusive"]
    assert all(r.cached and r.cost.cache_hits == 1 and r.cost.judge_calls == 0 for r in again)
    assert len(calls(backend)) == 3


def test_a_consistency_check_cut_off_for_length_accepts_no_statement():
    """The checker's "Correct" in a reply that stopped for length is no verdict (issue 21): no statement passes,
    nothing is proved, the claim is inconclusive and the reason names the cut-off."""
    from rewardkit.backends.base import Completion

    inner = Scripted()
    reply = inner._reply

    def cut(text: str):
        got = reply(text)
        return Completion(got, finish_reasons=["length"] * len(got)) if _role(text) == "consistency" else got

    backend = ScriptedJudge(cut, [0.9, 0.1])
    (r,) = LeanVerifier(backend, LeanSubprocess(LEAN), k_formal=2, k_prove=2).verify_many(
        [Claim("If x + 2 = 5, what is x?", "3")])
    assert r.outcome == "inconclusive" and "length" in r.reason
    assert [role for role, _ in calls(backend)] == ["formalise", "consistency"]


def test_pipeline_rejects_hacks_and_gives_up_after_k():
    backend = Scripted(proofs=("  sorry", "  native_decide", "  omega\n#exit"))
    ver = LeanVerifier(backend, LeanSubprocess(LEAN), k_formal=2, k_prove=5, attempts_per_round=2)
    (r,) = ver.verify_many([Claim("If x + 2 = 5, what is x?", "3")])
    assert r.outcome == "inconclusive" and "no proof accepted in 5 attempt(s)" in r.reason
    assert [r for r, _ in calls(backend)].count("prove") == 3  # rounds of 2, 2, 1


def test_lean_timeouts_are_inconclusive_and_not_cached(tmp_path):
    slow = LeanSubprocess(LEAN, timeout=0.5, probe=False, env={"LEAN_STANDIN_SLEEP": "30"})
    cache = VerificationCache(tmp_path / "c.sqlite")
    ver = LeanVerifier(Scripted(), slow, k_formal=2, k_prove=1, cache=cache)
    (r,) = ver.verify_many([Claim("If x + 2 = 5, what is x?", "3")])
    assert r.outcome == "inconclusive"
    assert len(cache) == 0


def test_proof_gate_scorer_with_the_lean_pipeline():
    ver = LeanVerifier(Scripted(), LeanSubprocess(LEAN), k_formal=2, k_prove=2)
    g = Group("g", "If x + 2 = 5, what is x?", ["\\boxed{3}", "x is \\boxed{3}", "\\boxed{4}", "\\boxed{3.0}"])
    (s,) = ProofGateScorer(verifier=ver).score([g])
    assert s.stats["gate"] == "verified"
    np.testing.assert_array_equal(s.rewards, [1, 1, 0, 1])  # 3.0 is the same answer as 3


def test_llm_judge_masks_invalid_output():
    replies = iter(["It is correct.\nFinal judgment: True", "hmm"])
    groups = [Group(str(i), "q", ["\\boxed{1}", "\\boxed{1}", "\\boxed{2}"]) for i in range(2)]
    a, b = LLMJudgeScorer(judge=ScriptedJudge(lambda prompt: next(replies))).score(groups)
    np.testing.assert_array_equal(a.rewards, [1, 1, 0])
    assert b.statuses == [Status.INVALID] * 3 and np.isnan(b.rewards).all()
    assert "no True/False verdict" in b.messages[0]


# --------------------------------------------------------------------------- the real model


@pytest.mark.model
def test_pipeline_roles_on_the_real_model(judge_backend):
    ver = LeanVerifier(judge_backend, LeanSubprocess(LEAN), k_formal=1, k_prove=1, max_tokens=24, temperature=0.0)
    (r,) = ver.verify_many([Claim("What is 1 + 1?", "2")])
    assert r.outcome in ("verified", "inconclusive")  # the pipeline never refutes
    assert r.cost.judge_calls >= 1 and r.cost.prompt_tokens > 50
    assert r.reason


@pytest.mark.model
def test_llm_judge_on_the_real_model(judge_backend):
    groups = [Group("a", "What is 2 + 3?", ["\\boxed{5}", "\\boxed{5}", "\\boxed{6}"]),
              Group("b", "What is 2 * 3?", ["\\boxed{6}", "\\boxed{5}", "\\boxed{6}"])]
    scores = LLMJudgeScorer(judge=judge_backend, mode="logit").score(groups)
    for s in scores:
        assert s.statuses == [Status.OK] * 3 and s.cost.judge_calls == 1
        assert set(s.rewards.tolist()) <= {0.0, 1.0}
        assert s.stats["gate"] in ("verified", "refuted")
    (v,) = LLMJudgeVerifier(judge_backend, max_tokens=16).verify_many([Claim("What is 2 + 3?", "5")])
    assert v.cost.judge_calls == 1 and v.cost.completion_tokens <= 16
