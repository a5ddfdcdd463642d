"""The App. C pipeline (autoformalise -> consistency -> prove -> Lean) on a scripted backend and the
stand-in `lean`; the LLM-as-a-judge verifier; one real-model run of each (mechanics only)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rewardkit.backends.base import ChatRequest, Completion, JudgeBackend, VerdictResult
from rewardkit.lean.cache import VerificationCache
from rewardkit.lean.check import DEFAULT_HEADER
from rewardkit.lean.pipeline import LeanVerifier, extract_lean, formal_statement, parse_consistency
from rewardkit.lean.subprocess import LeanSubprocess
from rewardkit.prompts import jury as P
from rewardkit.proof_gate import Claim, LLMJudgeScorer, LLMJudgeVerifier, ProofGateScorer, parse_true_false
from rewardkit.types import Group, Status

LEAN = str(Path(__file__).parent / "lean_standins" / "lean")
STMT = "theorem test_problem (x : ℕ) (h : x + 2 = 5) : x = {ans}"


def fence(code: str) -> str:
    return f"Let me think.\n```lean4\n{code}\n```\n"


class Scripted(JudgeBackend):
    """Test double of the three LLM roles, answering from the prompt; records every batched call."""

    model_id = "scripted"

    def __init__(self, proofs=("  sorry", "  omega")):
        self.calls: list[tuple[str, list[ChatRequest]]] = []
        self.proofs = list(proofs)

    def generate(self, requests):
        role = self._role(requests[0])
        self.calls.append((role, list(requests)))
        out = []
        for r in requests:
            text = r.messages[-1]["content"]
            if role == "formalise":
                ans = text.split("The answer is ")[1].split(".\n")[0].strip()
                texts = ["no code here", fence(STMT.format(ans=ans) + " := by\n  sorry")] + [fence("theorem other : True := trivial")] * (r.n - 2)
            elif role == "consistency":
                texts = ["<comments>fine</comments>\n<consistency>" + ("Correct" if "x = 3" in text else "Incorrect") + "</consistency>"]
            else:
                stmt = text.split("```lean4\n")[1].split(" := by")[0]
                stmt = stmt[stmt.index("theorem"):]
                texts = [fence(stmt + " := by\n" + self.proofs[i % len(self.proofs)]) for i in range(r.n)]
            out.append(Completion(texts[: r.n], prompt_tokens=10, completion_tokens=5 * r.n))
        return out

    @staticmethod
    def _role(req: ChatRequest) -> str:
        if req.messages[0]["role"] == "system":
            return "consistency"
        return "formalise" if "autoformalize" in req.messages[-1]["content"] else "prove"

    def verdict_probs(self, requests):
        return [VerdictResult(np.array([0.9, 0.1])) for _ in requests]


def test_prompts_are_the_papers():
    assert P.AUTOFORMALIZER.startswith("Please autoformalize the following natural language problem statement in Lean 4.")
    assert "<consistency>[Correct/Incorrect]</consistency>" in P.CONSISTENCY_SYSTEM
    assert P.PROVER.startswith("Complete the following Lean 4 code:\n\n```lean4\n{formal_statement}\n```")
    assert P.LLM_JUDGE_SYSTEM.endswith("your final judgment: True or False.")


def test_parsers():
    assert parse_consistency("<consistency>Incorrect</consistency>").label == "Incorrect"
    assert parse_consistency("x <consistency>[Correct]</consistency>").label == "Correct"
    assert parse_consistency("Correct").status is Status.INVALID
    assert parse_true_false("so it is true... Final judgment: False.").label == "False"
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
    roles = [r for r, _ in backend.calls]
    assert roles == ["formalise", "consistency", "prove"]  # one batched call per stage
    assert [len(reqs) for _, reqs in backend.calls] == [2, 2, 1]
    assert good.cost.judge_calls == 3 and good.cost.verifier_calls == 1 + 2  # statement check + 2 proofs
    # second time: from the persistent cache, no model or Lean work
    again = ver.verify_many(claims)
    assert [r.outcome for r in again] == ["verified", "inconclusive"]
    assert all(r.cached and r.cost.cache_hits == 1 and r.cost.judge_calls == 0 for r in again)
    assert len(backend.calls) == 3


def test_pipeline_rejects_hacks_and_gives_up_after_k():
    backend = Scripted(proofs=("  sorry", "  native_decide", "  omega\n#exit"))
    ver = LeanVerifier(backend, LeanSubprocess(LEAN), k_formal=2, k_prove=5, attempts_per_round=2)
    (r,) = ver.verify_many([Claim("If x + 2 = 5, what is x?", "3")])
    assert r.outcome == "inconclusive" and "no proof accepted in 5 attempt(s)" in r.reason
    assert [r for r, _ in backend.calls].count("prove") == 3  # rounds of 2, 2, 1


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
    class Judge(Scripted):
        def generate(self, requests):
            return [Completion(["It is correct. Final judgment: True"]), Completion(["hmm"])]

    groups = [Group(str(i), "q", ["\\boxed{1}", "\\boxed{1}", "\\boxed{2}"]) for i in range(2)]
    a, b = LLMJudgeScorer(judge=Judge()).score(groups)
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
