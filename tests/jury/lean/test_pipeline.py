"""The App. C pipeline (autoformalise -> consistency -> prove -> Lean) on a scripted backend and the
stand-in `lean`; the LLM-as-a-judge verifier; one real-model run of each (mechanics only)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rewardkit.backends.base import Completion
from rewardkit.jury.lean.cache import VerificationCache
from rewardkit.jury.lean.check import DEFAULT_HEADER, LeanMessage, LeanRun
from rewardkit.jury.lean.pipeline import LeanVerifier, extract_lean, formal_statement, parse_consistency
from rewardkit.jury.lean.subprocess import LeanSubprocess, LeanToolchainError
from rewardkit.jury.proof_gate import (
    Claim,
    LLMJudgeScorer,
    LLMJudgeVerifier,
    ProofGateScorer,
    parse_true_false,
)
from rewardkit.prompts import jury as P
from rewardkit.testing import ScriptedJudge
from rewardkit.types import Cost, Group, Status

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


# --------------------------------------------------------------------------- each stage, in-process Lean

def _load_engine():
    import importlib.util

    spec = importlib.util.spec_from_file_location("_lean_standin_engine", Path(LEAN).parent / "_engine.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_ENGINE = _load_engine()


class Engine:
    """The stand-in Lean's elaborator in this process (no subprocess per check); a source for which ``timeout``
    holds does not finish (a LeanRun with status timeout). Records every batch it was given."""

    name = "standin-engine"

    def __init__(self, timeout=lambda source: False):
        self.timeout, self.batches = timeout, []

    def run_many(self, sources):
        self.batches.append(list(sources))
        return [LeanRun(status="timeout", error="lean exceeded 1s") if self.timeout(s)
                else LeanRun([LeanMessage.from_json(m) for m in _ENGINE.elaborate(s)]) for s in sources]

    def close(self):
        pass


S3 = "theorem test_problem (x : ℕ) (h : x + 2 = 5) : x = 3"
S3B = "theorem test_problem (x : ℕ) (h : 2 + x = 5) : x = 3"  # a second, different formalisation
S4 = "theorem test_problem (x : ℕ) (h : x + 2 = 5) : x = 4"
BAD = "lemma helper : True := by\n  exact bogus\n\n" + S3  # the statement check reports Unknown identifier `bogus`
Q = "If x + 2 = 5, what is x?"


def formal(stmt: str) -> str:
    """What a formaliser's ``stmt := by ...`` becomes: our header, a blank line, the statement with ``sorry``."""
    return DEFAULT_HEADER + "\n" + stmt + " := by\n  sorry\n"


def stmt_in(prompt: str) -> str:
    """The theorem statement (from ``theorem`` to before ``:= by``) in a prover or consistency prompt."""
    body = prompt.split("```lean4\n" if "```lean4\n" in prompt else "```lean\n")[1]
    return body[body.index("theorem test_problem"):].split(" := by")[0]


def roles(formalise, consistency="<consistency>Correct</consistency>", prove=None, **kw) -> ScriptedJudge:
    """A scripted judge answering each role with a constant or a function of the prompt."""
    table = {"formalise": formalise, "consistency": consistency, "prove": prove}

    def reply(text):
        got = table[_role(text)]
        return got(text) if callable(got) else got

    return ScriptedJudge(reply, **kw)


def rounds(*replies):
    """A prover answering its i-th request with ``replies[i]``: each a list of proof bodies (``None``: a reply
    without a code block; a string starting ``theorem``: that whole theorem), put under the prompt's statement."""
    it = iter(replies)

    def reply(prompt):
        out = []
        for body in next(it):
            if body is None:
                out.append("I could not find a proof.")
            elif body.startswith("theorem"):
                out.append(fence(body))
            else:
                out.append(fence(stmt_in(prompt) + " := by\n" + body))
        return out

    return reply


def test_extract_lean_takes_the_last_fenced_block_declaring_the_theorem():
    two = fence("theorem test_problem : 1 = 1 := rfl") + "then\n```lean\ntheorem test_problem : 2 = 2 := rfl\n```"
    assert extract_lean(two) == "theorem test_problem : 2 = 2 := rfl\n"
    later_other = fence("theorem test_problem : 1 = 1 := rfl") + fence("theorem other : True := trivial")
    assert extract_lean(later_other) == "theorem test_problem : 1 = 1 := rfl\n"
    multi = "```\n  lemma test_problem : True := by\n  trivial\n\n```"  # bare fence, lemma, several lines
    assert extract_lean(multi) == "lemma test_problem : True := by\n  trivial\n"
    assert extract_lean("``` lean4 \ntheorem test_problem : True := trivial\n```") == "theorem test_problem : True := trivial\n"
    assert extract_lean("```python\ntheorem test_problem : True := trivial\n```") is None  # not a Lean block
    assert extract_lean(fence("theorem test_problem2 : True := trivial")) is None  # another name
    assert extract_lean("theorem test_problem : True := trivial") is None  # no fence
    assert extract_lean(None) is None
    assert extract_lean(fence("theorem t : True := trivial"), "t") == "theorem t : True := trivial\n"


def test_formal_statement_keeps_the_candidates_imports_and_names():
    assert formal_statement(fence("import Mathlib\ntheorem test_problem : 1 + 1 = 2 := by norm_num")) == \
        "import Mathlib\ntheorem test_problem : 1 + 1 = 2 := by\n  sorry\n"  # its own imports: no header added
    assert formal_statement(fence("theorem t (x : ℕ) : x = x := rfl"), "t", "import Foo\n") == \
        "import Foo\n\ntheorem t (x : ℕ) : x = x := by\n  sorry\n"
    assert formal_statement(fence("theorem t : True := trivial")) is None
    assert formal_statement(fence(S3 + " := by\n  omega")) == formal(S3)


def test_each_stage_counts_its_own_costs():
    """Claim a: 4 samples give 2 distinct candidates (one without code, one repeated); the checker rejects the
    first and picks the second; round 1: no code + sorry (Lean ran), round 2: a changed statement (refused
    before Lean) + omega (accepted). Claim b: its only candidate is judged Incorrect. Scripted tokens: 10 per
    request, 5 per sample."""
    replies = {"3": [fence(S3 + " := by\n  simp"), "no code", fence(S3 + " := by\n  omega"), fence(S3B + " := by\n  simp")],
               "4": [fence(S4 + " := by\n  simp")] + ["no code"] * 3}
    prove = rounds([None, "  sorry"], [S4 + " := by\n  omega", "  omega"])
    backend = roles(lambda p: replies[p.split("The answer is ")[1][0]],
                    lambda p: "<consistency>" + ("Correct" if "2 + x" in p else "Incorrect") + "</consistency>", prove)
    lean = Engine()
    a, b = LeanVerifier(backend, lean, k_formal=4, k_prove=4, attempts_per_round=2).verify_many(
        [Claim(Q, "3"), Claim(Q, "4")])
    assert a.outcome == "verified" and a.reason == "Lean accepted a proof after 4 attempt(s)" and not a.cached
    assert a.detail == {"formal_statement": formal(S3B), "attempts": 4,
                        "proof": S3B + " := by\n  omega\n"}
    assert a.cost == Cost(judge_calls=5, prompt_tokens=50, completion_tokens=20 + 10 + 20, verifier_calls=2 + 2)
    assert b.outcome == "inconclusive" and not b.cached
    assert b.reason == "none of 1 candidate formalisation(s) passed the type check and the consistency check"
    assert b.detail == {"formal_statement": None, "attempts": 0, "failures": []}
    assert b.cost == Cost(judge_calls=2, prompt_tokens=20, completion_tokens=20 + 5, verifier_calls=1)
    # one batched call per stage and round: formalise both, check 3 statements, judge 3, prove twice (a only)
    assert backend.batches == [("generate", 2), ("generate", 3), ("generate", 1), ("generate", 1)]
    assert [len(batch) for batch in lean.batches] == [3, 1, 1]
    assert lean.batches[0] == [formal(S3), formal(S3B), formal(S4)]


def test_requests_carry_the_settings_and_the_claim():
    backend = roles([fence(S3 + " := by\n  simp")], prove=rounds(["  omega"]))
    ver = LeanVerifier(backend, Engine(), k_formal=3, k_prove=5, attempts_per_round=4, temperature=0.25,
                       max_tokens=77, seed=11)
    (r,) = ver.verify_many([Claim("  If x + 2 = 5, what is x?\n", " 3 ")])
    assert r.outcome == "verified" and r.detail["attempts"] == 4
    form, cons, prove = backend.requests
    assert [(q.n, q.max_tokens, q.temperature, q.seed) for q in backend.requests] == [(3, 77, 0.25, 11), (1, 77, 0.25, 11),
                                                                                     (4, 77, 0.25, 11)]
    assert form.messages == [{"role": "user", "content": (
        "Please autoformalize the following natural language problem statement in Lean 4.\n"
        "Use the following theorem name: test_problem\nThe natural language statement is:\n"
        "If x + 2 = 5, what is x?\nThe answer is 3.\nThink before you provide the lean statement.")}]
    assert [m["role"] for m in cons.messages] == ["system", "user"]
    assert cons.messages[0]["content"] == P.CONSISTENCY_SYSTEM
    assert cons.messages[1]["content"] == ("Input Data:\n\nThe Natural Language Statement:\nIf x + 2 = 5, what is "
                                           "x?\nThe answer is 3\n\nThe Formal Statement in Lean4:\n```lean\n"
                                           + formal(S3) + "\n```")
    assert prove.messages == [{"role": "user", "content": P.PROVER.format(formal_statement=formal(S3))}]


def test_defaults_follow_app_c2():
    """Up to 8 formalisations, up to 16 proofs (here in 4 rounds of 4), temperature 0.7, 32,768 max tokens."""
    backend = roles([fence(S3 + " := by\n  simp")] * 9, prove=lambda p: [fence(stmt_in(p) + " := by\n  sorry")] * 16)
    ver = LeanVerifier(backend, Engine())
    (r,) = ver.verify_many([Claim(Q, "3")])
    assert [(q.n, q.temperature, q.max_tokens, q.seed) for q in backend.requests] == \
        [(8, 0.7, 32768, None), (1, 0.7, 32768, None)] + [(4, 0.7, 32768, None)] * 4
    assert r.outcome == "inconclusive" and r.detail["attempts"] == 16
    assert r.reason == ("no proof accepted in 16 attempt(s) (last: uses sorry; depends on axioms outside "
                        "{propext, Classical.choice, Quot.sound}: ['sorryAx'])")  # check.py's rules 3 and 5
    s = ver.settings()
    assert (s["k_formal"], s["k_prove"], s["temperature"], s["max_tokens"], s["typecheck"], s["theorem"]) == \
        (8, 16, 0.7, 32768, True, "test_problem")


def test_rounds_of_at_least_one_attempt_up_to_k():
    backend = roles([fence(S3 + " := by\n  simp")], prove=lambda p: [fence(stmt_in(p) + " := by\n  sorry")] * 16)
    (r,) = LeanVerifier(backend, Engine(), k_prove=3, attempts_per_round=0).verify_many([Claim(Q, "3")])
    assert [q.n for q in backend.requests if _role(q.messages[-1]["content"]) == "prove"] == [1, 1, 1]
    assert r.reason.startswith("no proof accepted in 3 attempt(s)")


def test_stop_at_the_first_accepted_proof_in_attempt_order():
    """Both claims' first round holds two accepted proofs: the first is kept, both were checked, no second round."""
    backend = roles(lambda p: [fence((S3 if "is 3" in p else S3B) + " := by\n  simp")],
                    prove=lambda p: [fence(stmt_in(p) + " := by\n  omega"), fence(stmt_in(p) + " := by\n  simp")] * 2)
    a, b = LeanVerifier(backend, Engine(), k_prove=4, attempts_per_round=2).verify_many([Claim(Q, "3"), Claim(Q, "three")])
    for r, stmt in ((a, S3), (b, S3B)):
        assert r.outcome == "verified" and r.detail["proof"] == stmt + " := by\n  omega\n"
        assert r.reason == "Lean accepted a proof after 2 attempt(s)"
        assert r.cost.verifier_calls == 1 + 2 and r.cost.judge_calls == 3
    assert [n for _, n in backend.batches] == [2, 2, 2]


def test_the_first_candidate_judged_correct_is_selected():
    """Claim 3: both candidates judged Correct, the first is taken; claim 4 (judged after them in the same
    batch) has its own."""
    backend = roles(lambda p: [fence(S3 + " := by\n  simp"), fence(S3B + " := by\n  simp")] if "is 3" in p
                    else [fence(S4 + " := by\n  simp")], prove=lambda p: [fence(stmt_in(p) + " := by\n  omega")])
    a, b = LeanVerifier(backend, Engine(), k_formal=2, k_prove=1).verify_many([Claim(Q, "3"), Claim(Q, "4")])
    assert a.detail["formal_statement"] == formal(S3) and a.cost.judge_calls == 1 + 2 + 1
    assert b.detail["formal_statement"] == formal(S4) and b.outcome == "verified"


def test_statements_lean_rejects_are_dropped_unless_the_check_is_off():
    cands = [fence(BAD + " := by\n  simp"), fence(S3 + " := by\n  simp")]
    backend = roles(cands, prove=rounds(["  omega"]))
    lean = Engine()
    (r,) = LeanVerifier(backend, lean, k_formal=2, k_prove=1).verify_many([Claim(Q, "3")])
    assert r.detail["formal_statement"] == formal(S3)
    assert r.cost.verifier_calls == 2 + 1 and len(backend.requests) == 1 + 1 + 1  # BAD never judged
    backend = roles(cands, prove=rounds(["  omega"]))
    lean = Engine()
    (r,) = LeanVerifier(backend, lean, k_formal=2, k_prove=1, typecheck_statements=False).verify_many([Claim(Q, "3")])
    assert r.detail["formal_statement"] == formal(BAD) and r.cost.verifier_calls == 1  # the proof only
    assert lean.batches[0][0].count("#print axioms") == 1


def test_only_bad_statements_name_their_count():
    backend = roles([fence(BAD + " := by\n  simp"), "no code", fence(BAD + " := by\n  omega")])
    lean = Engine()
    (r,) = LeanVerifier(backend, lean, k_formal=3).verify_many([Claim(Q, "3")])
    assert r.reason == "none of 1 candidate formalisation(s) passed the type check and the consistency check"
    assert r.cost == Cost(judge_calls=1, prompt_tokens=10, completion_tokens=15, verifier_calls=1)
    assert backend.batches == [("generate", 1)]  # nothing left to judge or prove: no empty backend call


def test_per_claim_reasons():
    (r,) = LeanVerifier(roles("no code"), Engine(), k_formal=2).verify_many([Claim(Q, "3")])
    assert r.reason == "no autoformalisation candidate with a Lean code block declaring the theorem"
    assert r.detail == {"formal_statement": None, "attempts": 0, "failures": []}
    (r,) = LeanVerifier(roles(Status.TIMEOUT), Engine()).verify_many([Claim(Q, "3")])
    assert r.reason == ("no autoformalisation candidate with a Lean code block declaring the theorem "
                        "(last: autoformaliser timeout: scripted timeout)")
    (r,) = LeanVerifier(roles([fence(S3 + " := by\n  simp")], Status.ERROR), Engine()).verify_many([Claim(Q, "3")])
    assert r.reason == ("none of 1 candidate formalisation(s) passed the type check and the consistency check "
                        "(last: consistency checker: scripted error)")
    (r,) = LeanVerifier(roles([fence(S3 + " := by\n  simp")], prove=rounds([None, None])), Engine(),
                        k_prove=2).verify_many([Claim(Q, "3")])
    assert r.reason == "no proof accepted in 2 attempt(s) (last: prover output has no Lean code block with the theorem)"
    assert r.detail == {"formal_statement": formal(S3), "attempts": 2,
                        "failures": ["prover output has no Lean code block with the theorem"] * 2}
    assert r.cost.verifier_calls == 1  # the statement only


def test_the_reason_shows_the_last_failure_cut_and_the_detail_the_last_five():
    n = iter(range(7))
    long = "x" * 400
    prove = lambda p: Completion([], Status.ERROR, error=f"boom {next(n)} {long}")  # noqa: E731
    (r,) = LeanVerifier(roles([fence(S3 + " := by\n  simp")], prove=prove), Engine(), k_prove=7,
                        attempts_per_round=1).verify_many([Claim(Q, "3")])
    assert r.reason == "no proof accepted in 7 attempt(s) (last: " + ("prover error: boom 6 " + long)[:300] + ")"
    assert r.detail["failures"] == [f"prover error: boom {i} {long}" for i in (2, 3, 4, 5, 6)]
    assert r.detail["attempts"] == 7 and r.cost.judge_calls == 1 + 1 + 7


def test_each_role_uses_its_own_backend():
    f = roles([fence(S3 + " := by\n  simp")], model_id="f")
    c = roles(None, model_id="c")
    p = roles(None, prove=rounds(["  omega"]), model_id="p")
    ver = LeanVerifier(roles(None, None, None), Engine(), formalizer=f, consistency=c, prover=p, k_prove=1)
    (r,) = ver.verify_many([Claim(Q, "3")])
    assert r.outcome == "verified"
    assert [len(j.requests) for j in (f, c, p)] == [1, 1, 1]
    assert [_role(j.requests[0].messages[-1]["content"]) for j in (f, c, p)] == ["formalise", "consistency", "prove"]
    s = ver.settings()
    assert (s["formalizer"], s["consistency"], s["prover"], s["checker"]) == ("f", "c", "p", "standin-engine")


def test_settings_name_everything_that_changes_a_verdict():
    base = LeanVerifier(roles(None), Engine())
    # the seed and the round size too: either changes which proofs are sampled, so a cached verdict made under
    # another must not answer (before, both were left out of the cache key)
    assert set(base.settings()) == {"formalizer", "consistency", "prover", "checker", "k_formal", "k_prove",
                                    "attempts_per_round", "seed", "temperature", "max_tokens", "typecheck", "theorem",
                                    "prompts"}
    assert (base.settings()["formalizer"], base.settings()["checker"]) == ("scripted", "standin-engine")
    prompts = base.settings()["prompts"]
    assert len(prompts) == 16 and int(prompts, 16) >= 0
    assert (base.settings()["attempts_per_round"], base.settings()["seed"]) == (4, None)
    changed = {"k_formal": 2, "k_prove": 3, "temperature": 0.1, "max_tokens": 9, "typecheck_statements": False,
               "theorem": "t", "attempts_per_round": 2, "seed": 7}
    for kw, v in changed.items():
        s = LeanVerifier(roles(None), Engine(), **{kw: v}).settings()
        assert s[{"typecheck_statements": "typecheck"}.get(kw, kw)] == v and s["prompts"] == prompts
    assert LeanVerifier(roles(None), Engine(), header="import Foo\n").settings()["prompts"] != prompts


def test_the_cache_serves_hits_and_runs_only_the_misses(tmp_path):
    cache = VerificationCache(tmp_path / "c.sqlite")

    def make(**kw):
        return roles(lambda p: [fence(S3 + " := by\n  simp")], prove=lambda p: [fence(stmt_in(p) + " := by\n  omega")] * 4,
                     **kw)

    first = LeanVerifier(make(), Engine(), k_prove=2, cache=cache).verify_many([Claim(Q, "3")])[0]
    assert len(cache) == 1 and not first.cached
    backend = make()
    hit, new = LeanVerifier(backend, Engine(), k_prove=2, cache=cache).verify_many([Claim(Q, "3"), Claim(Q, "03")])
    assert hit.cached and hit.cost == Cost(cache_hits=1)
    assert (hit.outcome, hit.reason, hit.detail) == (first.outcome, first.reason, first.detail)
    assert not new.cached and new.cost.judge_calls == 3 and new.cost.cache_hits == 0
    assert [n for _, n in backend.batches] == [1, 1, 1] and "The answer is 03" in backend.prompts[0]
    assert len(cache) == 2
    # another setting is another key: no stale verdict
    backend = make()
    (again,) = LeanVerifier(backend, Engine(), k_prove=3, cache=cache).verify_many([Claim(Q, "3")])
    assert not again.cached and len(backend.batches) == 3 and len(cache) == 3
    backend = make(model_id="other")
    (again,) = LeanVerifier(backend, Engine(), k_prove=2, cache=cache).verify_many([Claim(Q, "3")])
    assert not again.cached and len(cache) == 4


def test_proof_checks_that_did_not_finish_are_not_cached_but_rejections_are(tmp_path):
    """Claim 3's round: a check that timed out, then a rejected proof (still transient); claim 4: two rejected
    proofs (cached: failing to prove is a result, not a transient failure)."""
    cache = VerificationCache(tmp_path / "c.sqlite")
    backend = roles(lambda p: [fence((S3 if "is 3" in p else S4) + " := by\n  simp")],
                    prove=lambda p: [fence(stmt_in(p) + " := by\n  exact bogus"), fence(stmt_in(p) + " := by\n  sorry")])
    lean = Engine(timeout=lambda src: "bogus" in src and "x = 3" in src)
    slow, wrong = LeanVerifier(backend, lean, k_prove=2, cache=cache).verify_many([Claim(Q, "3"), Claim(Q, "4")])
    assert slow.outcome == wrong.outcome == "inconclusive"
    assert slow.detail["failures"][0] == "lean check timeout: lean exceeded 1s"
    assert slow.cost.verifier_calls == 1 + 2  # a check that ran out of time still ran
    assert len(cache) == 1
    assert LeanVerifier(backend, Engine(), k_prove=2, cache=cache).verify_many([Claim(Q, "4")])[0].cached


def test_statement_checks_that_did_not_finish_are_not_cached(tmp_path):
    cache = VerificationCache(tmp_path / "c.sqlite")
    backend = roles([fence(S3 + " := by\n  simp"), fence(S3B + " := by\n  simp")], prove=rounds(["  omega"]))
    lean = Engine(timeout=lambda src: "2 + x" in src)
    (r,) = LeanVerifier(backend, lean, k_formal=2, k_prove=1, cache=cache).verify_many([Claim(Q, "3")])
    assert r.outcome == "verified" and r.detail["formal_statement"] == formal(S3)  # the other one timed out
    assert r.cost.verifier_calls == 2 + 1
    # verified is cached although another statement's check did not finish: Lean accepted a proof of a statement
    # judged consistent, which no re-run can undo; the next batch reads it back without a model call
    assert len(cache) == 1
    backend = roles(Status.TIMEOUT)
    (again,) = LeanVerifier(backend, Engine(), k_formal=2, k_prove=1, cache=cache).verify_many([Claim(Q, "3")])
    assert again.cached and again.outcome == "verified" and not backend.batches


def test_a_proof_accepted_after_a_check_that_did_not_finish_is_cached(tmp_path):
    """One round of two proofs: the first one's check times out, the second is accepted: verified, and cached."""
    cache = VerificationCache(tmp_path / "c.sqlite")
    backend = roles([fence(S3 + " := by\n  simp")], prove=rounds(["  exact bogus", "  omega"]))
    lean = Engine(timeout=lambda src: "bogus" in src)
    (r,) = LeanVerifier(backend, lean, k_prove=2, attempts_per_round=2, cache=cache).verify_many([Claim(Q, "3")])
    assert r.outcome == "verified" and r.detail["attempts"] == 2 and "omega" in r.detail["proof"]
    assert len(lean.batches[-1]) == 2 and len(cache) == 1


def test_from_specs_builds_the_checker_first(monkeypatch, tmp_path):
    import rewardkit.backends
    import rewardkit.jury.lean

    seen, judge, lean = [], roles(None), Engine()
    monkeypatch.setattr(rewardkit.backends, "load_backend", lambda spec: seen.append(("backend", spec)) or judge)
    monkeypatch.setattr(rewardkit.jury.lean, "make_checker", lambda spec: seen.append(("lean", spec)) or lean)
    ver = LeanVerifier.from_specs()
    assert seen == [("lean", "auto"), ("backend", "smollm2")] and ver.cache is None
    assert ver.checker is lean and ver.formalizer is ver.consistency is ver.prover is judge
    ver = LeanVerifier.from_specs("scripted-spec", "repl:x", str(tmp_path / "c.sqlite"), k_prove=3)
    assert seen[2:] == [("lean", "repl:x"), ("backend", "scripted-spec")]
    assert isinstance(ver.cache, VerificationCache) and ver.cache.path.endswith("c.sqlite") and ver.k_prove == 3

    def missing(spec):
        raise LeanToolchainError("no lean")

    monkeypatch.setattr(rewardkit.jury.lean, "make_checker", missing)
    with pytest.raises(LeanToolchainError):
        LeanVerifier.from_specs()
    assert len(seen) == 4  # no judge loaded


@pytest.mark.parametrize("judge", [
    roles(Status.TIMEOUT),
    roles([fence(S3 + " := by\n  simp")], Status.ERROR),
    roles([fence(S3 + " := by\n  simp")], prove=Status.TIMEOUT),
], ids=["autoformaliser", "consistency checker", "prover"])
def test_a_judge_call_that_failed_is_not_cached(judge, tmp_path):
    """A backend call that failed (timeout, server error) says nothing about the claim: inconclusive, and not
    stored, so the next batch tries again instead of reading the failure back as the claim's verdict."""
    cache = VerificationCache(tmp_path / "c.sqlite")
    (r,) = LeanVerifier(judge, Engine(), k_prove=2, cache=cache).verify_many([Claim(Q, "3")])
    assert r.outcome == "inconclusive" and "scripted" in r.reason
    assert len(cache) == 0


def test_a_verdict_the_checker_failed_to_give_is_cached_but_a_failed_call_is_not(tmp_path):
    """An unreadable consistency verdict is the model's answer under these settings (cached); a call that failed
    before it is not undone by a later unreadable one."""
    cache = VerificationCache(tmp_path / "c.sqlite")
    judge = roles([fence(S3 + " := by\n  simp")], "Correct, I think.")
    (r,) = LeanVerifier(judge, Engine(), cache=cache).verify_many([Claim(Q, "3")])
    assert r.reason.startswith("none of 1 candidate") and len(cache) == 1
    judge = roles([fence(S3 + " := by\n  simp"), fence(S3B + " := by\n  simp")],
                  lambda p: "Correct, I think." if "2 + x" in p else Status.ERROR)  # S3 first
    (r,) = LeanVerifier(judge, Engine(), cache=cache).verify_many([Claim(Q, "4")])
    assert r.reason.startswith("none of 2 candidate") and "scripted error" in r.detail["failures"][0]
    assert len(cache) == 1
