"""The App. C Lean verifier: autoformalise -> consistency check -> prove -> Lean check, batched.

Per claim (problem, answer): the autoformaliser samples up to ``k_formal`` candidate statements
(``theorem test_problem``); candidates that Lean type-checks (with ``sorry``) are the "effective" ones;
the consistency checker judges them (``<consistency>Correct</consistency>``) and the first one judged
Correct is selected; the prover then samples up to ``k_prove`` proofs in rounds of
``attempts_per_round``, each round checked by Lean under the acceptance rule, stopping at the first
accepted proof. Every stage is one backend call (or one Lean batch) for all open claims of the batch.

Outcomes: verified (a proof was accepted) or inconclusive (no formalisation, none consistent, no proof
found, or the check did not finish). The pipeline never refutes: failing to prove is not a disproof.
An inconclusive claim whose Lean check or model call did not finish (timeout, crash, server error) is not
cached (the next batch tries again); a verified one is, whatever else failed: Lean accepted its proof.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardkit.backends.base import ChatRequest, Completion, JudgeBackend, cost_of
from rewardkit.jury.lean.cache import VerificationCache, cache_key
from rewardkit.jury.lean.check import (
    DEFAULT_HEADER,
    DEFAULT_THEOREM,
    LeanChecker,
    check_proofs,
    run_sources,
    split_header,
    with_sorry,
)
from rewardkit.prompts import get_prompt, render
from rewardkit.types import Cost, Status
from rewardkit.verdicts import Verdict, parse_consistency
from rewardkit.verifier import BaseVerifier, Claim, VerifyResult

_FENCE = re.compile(r"```[ \t]*(?:lean4|lean)?[ \t]*\n(.*?)```", re.S)


def extract_lean(text: str, theorem: str = DEFAULT_THEOREM) -> str | None:
    """The last fenced code block that declares ``theorem``, else None."""
    for block in reversed(_FENCE.findall(text or "")):
        if re.search(rf"\b(?:theorem|lemma)\s+{re.escape(theorem)}\b", block):
            return block.strip() + "\n"
    return None


def formal_statement(text: str, theorem: str = DEFAULT_THEOREM, header: str = DEFAULT_HEADER) -> str | None:
    """An autoformaliser output as a checkable statement: its code, our header when it has no imports,
    and the proof replaced by ``sorry``; None when there is no ``theorem`` to use."""
    code = extract_lean(text, theorem)
    if code is None:
        return None
    if not split_header(code)[0]:
        code = header + "\n" + code
    return with_sorry(code, theorem)


@dataclass
class _State:
    claim: Claim
    key: str | None = None
    cost: Cost = field(default_factory=Cost)
    candidates: list[str] = field(default_factory=list)
    n_formal: int = 0
    formal: str | None = None
    attempts: int = 0
    proof: str | None = None
    failures: list[str] = field(default_factory=list)
    transient: bool = False
    result: VerifyResult | None = None


class LeanVerifier(BaseVerifier):
    """Label-free verifier of App. C behind ``verify(problem, answer)``.

    ``backend`` runs the three LLM roles unless ``formalizer``/``consistency``/``prover`` give their own
    backends; ``checker`` is a Lean check backend (``rewardkit.jury.lean.make_checker``). Defaults follow App.
    C.2: up to 8 formalisations, up to 16 proof attempts, temperature 0.7, 32,768 max tokens.
    """

    name = "lean"

    def __init__(
        self,
        backend: JudgeBackend,
        checker: LeanChecker,
        *,
        formalizer: JudgeBackend | None = None,
        consistency: JudgeBackend | None = None,
        prover: JudgeBackend | None = None,
        k_formal: int = 8,
        k_prove: int = 16,
        attempts_per_round: int = 4,
        temperature: float = 0.7,
        max_tokens: int = 32768,
        typecheck_statements: bool = True,
        theorem: str = DEFAULT_THEOREM,
        header: str = DEFAULT_HEADER,
        cache: VerificationCache | None = None,
        seed: int | None = None,
    ):
        self.formalizer = formalizer or backend
        self.consistency = consistency or backend
        self.prover = prover or backend
        self.checker = checker
        self.k_formal, self.k_prove, self.attempts_per_round = k_formal, k_prove, max(1, attempts_per_round)
        self.temperature, self.max_tokens, self.seed = temperature, max_tokens, seed
        self.typecheck_statements, self.theorem, self.header = typecheck_statements, theorem, header
        self.cache = cache

    @classmethod
    def from_specs(cls, backend: str = "smollm2", lean: str = "auto", cache: str | None = None, **kw: Any) -> LeanVerifier:
        """Build from strings (CLI/registry): a backend spec, a checker spec and an optional cache path."""
        from rewardkit.backends import load_backend
        from rewardkit.jury.lean import make_checker

        checker = make_checker(lean)  # first: a missing Lean toolchain fails before a judge model is loaded
        return cls(load_backend(backend), checker, cache=VerificationCache(cache) if cache else None, **kw)

    def settings(self) -> dict[str, Any]:
        """Everything that changes a verdict (part of the cache key)."""
        names = ("autoformalizer", "consistency_system", "consistency_user", "prover", "informal_qa")
        prompts = hashlib.sha256(("".join(get_prompt(f"jury.{n}").text for n in names)
                                  + self.header).encode()).hexdigest()[:16]
        return {"formalizer": self.formalizer.model_id, "consistency": self.consistency.model_id,
                "prover": self.prover.model_id, "checker": self.checker.name, "k_formal": self.k_formal,
                "k_prove": self.k_prove, "attempts_per_round": self.attempts_per_round, "seed": self.seed,
                "temperature": self.temperature, "max_tokens": self.max_tokens,
                "typecheck": self.typecheck_statements, "theorem": self.theorem, "prompts": prompts}

    # ------------------------------------------------------------------------------------ stages

    def _request(self, messages: list[dict[str, str]], n: int) -> ChatRequest:
        return ChatRequest(messages=messages, max_tokens=self.max_tokens, temperature=self.temperature, n=n,
                           seed=self.seed)

    def _generate(self, backend: JudgeBackend, items: list[tuple[_State, ChatRequest]]) -> list[Completion]:
        if not items:
            return []
        outs = backend.generate([r for _, r in items])
        for (st, _), c in zip(items, outs, strict=True):
            st.cost += cost_of([c])
        return outs

    def _informal(self, claim: Claim) -> str:
        return render("jury.informal_qa", problem=claim.problem.strip(), answer=claim.answer.strip())

    def _formalise(self, states: list[_State]) -> None:
        items = [(s, self._request([{"role": "user", "content": render("jury.autoformalizer",
            theorem_name=self.theorem, informal_statement_content=self._informal(s.claim))}], self.k_formal))
            for s in states]
        for (s, _), comp in zip(items, self._generate(self.formalizer, items), strict=True):
            if comp.status is not Status.OK:  # the call failed (timeout, server error): transient, not cached
                s.transient = True
                s.failures.append(f"autoformaliser {comp.status}: {comp.error}")
                continue
            seen: set[str] = set()
            for t in comp.texts:
                f = formal_statement(t, self.theorem, self.header)
                if f is not None and f not in seen:
                    seen.add(f)
                    s.candidates.append(f)
            s.n_formal = len(s.candidates)

    def _typecheck(self, states: list[_State]) -> None:
        pairs = [(s, f) for s in states for f in s.candidates]
        if not pairs:
            return
        runs = run_sources(self.checker, [f for _, f in pairs])
        keep: dict[int, list[str]] = {id(s): [] for s in states}
        for (s, f), run in zip(pairs, runs):
            s.cost.verifier_calls += 1
            if run.status != "ok":
                s.transient = True
                s.failures.append(f"statement check {run.status}: {run.error}")
            elif not any(m.severity == "error" for m in run.messages):
                keep[id(s)].append(f)
        for s in states:
            s.candidates = keep[id(s)]

    def _select(self, states: list[_State]) -> None:
        items = [(s, self._request([
            {"role": "system", "content": get_prompt("jury.consistency_system").text},
            {"role": "user", "content": render("jury.consistency_user",
                informal_prefix=self._informal(s.claim), formal_statement=f)}], 1), f)
            for s in states for f in s.candidates]
        comps = self._generate(self.consistency, [(s, r) for s, r, _ in items])
        for (s, _, f), comp in zip(items, comps, strict=True):
            if s.formal is not None:
                continue
            v = (parse_consistency(comp.text, comp.finish_reason()) if comp.status is Status.OK
                 else Verdict(None, comp.status, comp.error))
            if v.label == "Correct":
                s.formal = f
            elif not v.ok:
                s.transient |= comp.status is not Status.OK  # the call failed, not the parse of its verdict
                s.failures.append(f"consistency checker: {v.message}")

    def _prove(self, states: list[_State]) -> None:
        open_ = [s for s in states if s.formal is not None]
        while open_:
            n = [min(self.attempts_per_round, self.k_prove - s.attempts) for s in open_]
            items = [(s, self._request([{"role": "user", "content": render("jury.prover", formal_statement=s.formal)}], k))
                     for s, k in zip(open_, n, strict=True)]
            comps = self._generate(self.prover, items)
            pairs, owners = [], []
            for s, k, comp in zip(open_, n, comps, strict=True):
                s.attempts += k
                if comp.status is not Status.OK:
                    s.transient = True
                    s.failures.append(f"prover {comp.status}: {comp.error}")
                    continue
                for t in comp.texts:
                    code = extract_lean(t, self.theorem)
                    if code is None:
                        s.failures.append("prover output has no Lean code block with the theorem")
                        continue
                    pairs.append((s.formal, code))
                    owners.append(s)
            verdicts = check_proofs(self.checker, pairs, self.theorem)  # type: ignore[arg-type]
            for s, (_, code), a in zip(owners, pairs, verdicts, strict=True):
                if a.lean_ran:
                    s.cost.verifier_calls += 1
                if s.proof is not None:
                    continue  # stop at the first success (in attempt order)
                if a.accepted:
                    s.proof = code
                else:
                    s.transient |= a.outcome == "inconclusive"
                    s.failures.append("; ".join(a.reasons))
            open_ = [s for s in open_ if s.proof is None and s.attempts < self.k_prove]

    # -------------------------------------------------------------------------------------- API

    def verify_many(self, claims: Sequence[Claim]) -> list[VerifyResult]:
        states = [_State(c) for c in claims]
        settings = self.settings() if self.cache is not None else None
        todo = []
        for s in states:
            if self.cache is not None:
                s.key = cache_key(s.claim.problem, s.claim.answer, settings)  # type: ignore[arg-type]
                hit = self.cache.get(s.key)
                if hit is not None:
                    s.result = VerifyResult(hit.outcome, hit.reason, Cost(cache_hits=1), True, hit.detail)  # type: ignore[arg-type]
                    continue
            todo.append(s)
        if todo:
            self._formalise(todo)
            if self.typecheck_statements:
                self._typecheck(todo)
            self._select(todo)
            self._prove(todo)
        for s in todo:
            s.result = self._finish(s)
            if self.cache is not None and (s.proof is not None or not s.transient):  # a proof stands on its own
                self.cache.put(s.key, s.result.outcome, s.result.reason, s.result.detail)  # type: ignore[arg-type]
        return [s.result for s in states]  # type: ignore[misc]

    def _finish(self, s: _State) -> VerifyResult:
        detail: dict[str, Any] = {"formal_statement": s.formal, "attempts": s.attempts}
        if s.proof is not None:
            detail["proof"] = s.proof
            return VerifyResult("verified", f"Lean accepted a proof after {s.attempts} attempt(s)", s.cost, False, detail)
        if s.formal is None:
            why = ("no autoformalisation candidate with a Lean code block declaring the theorem" if not s.n_formal
                   else f"none of {s.n_formal} candidate formalisation(s) passed the type check and the consistency check")
        else:
            why = f"no proof accepted in {s.attempts} attempt(s)"
        last = s.failures[-1] if s.failures else ""
        detail["failures"] = s.failures[-5:]
        return VerifyResult("inconclusive", why + (f" (last: {last[:300]})" if last else ""), s.cost, False, detail)
