"""The acceptance rule for a Lean 4 proof, and the message/run types every check backend returns.

A proof of the formal statement is accepted only if all of these hold (DESIGN.md section 4):
1. the submission's text up to the end of the theorem statement is the formalisation's own (statement
   identical; no added declarations, notation, macros or options before it), whitespace and comments aside;
2. Lean reports no error;
3. no ``sorry`` (both warning spellings, and any REPL ``sorries``; ``admit`` is reported as sorry);
4. Lean reached the appended ``#print axioms`` (so no ``#exit``), and the theorem depends only on
   ``propext``, ``Classical.choice`` and ``Quot.sound`` (an injected ``axiom``, ``sorryAx`` or the
   ``native_decide`` axioms ``Lean.ofReduceBool``/``Lean.trustCompiler`` are rejected).
A check that did not finish (timeout, crash, missing toolchain) is inconclusive, never accepted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

ALLOWED_AXIOMS = frozenset({"propext", "Classical.choice", "Quot.sound"})
SORRY_WARNINGS = ("declaration uses 'sorry'", "declaration uses `sorry`")  # older / Lean >= 4.2x spelling
EXIT_WARNING = "using 'exit' to interrupt Lean"
INIT_MISSING = "unknown module prefix 'Init'"
DEFAULT_THEOREM = "test_problem"  # the name the C.5 autoformaliser prompt asks for
DEFAULT_HEADER = (
    "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\nopen BigOperators Real Nat Topology Rat\n"
)


@dataclass(frozen=True)
class LeanMessage:
    """One Lean message; positions are 1-based lines and 0-based (codepoint) columns as Lean reports them."""

    severity: str  # "error" | "warning" | "information"
    data: str
    line: int = 0
    column: int = 0
    end_line: int | None = None
    end_column: int | None = None

    @classmethod
    def from_json(cls, obj: dict[str, Any], line_offset: int = 0) -> LeanMessage:
        """From a ``lean --json`` line or a REPL/Kimina message (same pos/endPos/severity/data keys)."""
        pos = obj.get("pos") or {}
        end = obj.get("endPos") or None
        return cls(
            str(obj.get("severity", "")), str(obj.get("data", "")),
            int(pos.get("line", 0)) + line_offset, int(pos.get("column", 0)),
            int(end["line"]) + line_offset if end else None, int(end["column"]) if end else None,
        )

    def __str__(self) -> str:
        return f"{self.line}:{self.column}: {self.severity}: {self.data}"


@dataclass
class LeanRun:
    """What a check backend saw for one source: its messages, or why it did not finish."""

    messages: list[LeanMessage] = field(default_factory=list)
    status: Literal["ok", "timeout", "error"] = "ok"
    error: str | None = None
    seconds: float = 0.0
    sorries: int = 0  # REPL/Kimina "sorries" entries


@runtime_checkable
class LeanChecker(Protocol):
    """A Lean check backend: ``run_many(sources) -> runs`` (lean subprocess, REPL, Kimina server)."""

    name: str

    def run_many(self, sources: Sequence[str]) -> list[LeanRun]: ...

    def close(self) -> None: ...


# ------------------------------------------------------------------------------------- source text


def strip_comments(code: str) -> str:
    """Blank out ``--`` and (nested) ``/- -/`` comments, keeping length and newlines."""
    out = list(code)
    i, depth, start = 0, 0, 0
    n = len(code)
    while i < n:
        if code.startswith("/-", i):
            if depth == 0:
                start = i
            depth += 1
            i += 2
        elif depth and code.startswith("-/", i):
            depth -= 1
            i += 2
            if depth == 0:
                for k in range(start, i):
                    if out[k] != "\n":
                        out[k] = " "
        elif not depth and code.startswith("--", i):
            j = code.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        else:
            i += 1
    if depth:  # unterminated block comment runs to the end
        for k in range(start, n):
            if out[k] != "\n":
                out[k] = " "
    return "".join(out)


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", strip_comments(text)).strip()


_OPEN, _CLOSE = "([{⟨", ")]}⟩"


def statement_end(code: str, theorem: str = DEFAULT_THEOREM) -> tuple[int, int] | None:
    """(start of the ``theorem``/``lemma`` keyword, offset of its ``:=``) for ``theorem``, or None."""
    text = strip_comments(code)
    m = re.search(rf"^[ \t]*(?:theorem|lemma)\s+{re.escape(theorem)}(?![\w'.])", text, re.M)
    if not m:
        return None
    depth = 0
    i = m.end()
    while i < len(text) - 1:
        ch = text[i]
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
        elif depth == 0 and text.startswith(":=", i):
            return m.start() + (len(m.group(0)) - len(m.group(0).lstrip())), i
        i += 1
    return None


def formal_prefix(code: str, theorem: str = DEFAULT_THEOREM) -> str | None:
    """The normalised text up to the statement's ``:=`` (header, preamble and statement)."""
    span = statement_end(code, theorem)
    return _normalise(code[: span[1]]) if span else None


def split_header(code: str) -> tuple[str, str]:
    """(leading ``import`` lines, the rest): the REPL takes imports only in an environment-less command."""
    lines = code.splitlines(keepends=True)
    k = 0
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("import "):
            k = i + 1
        elif s and not s.startswith("--"):
            break
    return "".join(lines[:k]), "".join(lines[k:])


def with_sorry(formal: str, theorem: str = DEFAULT_THEOREM) -> str | None:
    """The formal statement with its proof replaced by ``by sorry`` (what the prover prompt shows)."""
    span = statement_end(formal, theorem)
    if not span:
        return None
    return formal[: span[1]].rstrip() + " := by\n  sorry\n"


def build_source(formal: str, submission: str, theorem: str = DEFAULT_THEOREM) -> tuple[str | None, list[str]]:
    """The text Lean checks (the submission plus ``#print axioms``), or None with the textual reasons to
    reject it without running Lean (rule 1). A submission without imports gets the formalisation's
    preamble (everything before its theorem)."""
    reasons: list[str] = []
    want = formal_prefix(formal, theorem)
    if want is None:
        return None, [f"the formalisation has no theorem named {theorem!r}"]
    if not split_header(submission)[0]:  # a bare theorem: put it under the formalisation's preamble
        submission = formal[: statement_end(formal, theorem)[0]] + submission  # type: ignore[index]
    span = statement_end(submission, theorem)
    if span is None:
        return None, [f"the proof has no theorem named {theorem!r}"]
    got = _normalise(submission[: span[1]])
    if got != want:
        stmt_want = _normalise(formal[statement_end(formal, theorem)[0]: statement_end(formal, theorem)[1]])  # type: ignore[index]
        stmt_got = _normalise(submission[span[0]: span[1]])
        if stmt_got != stmt_want:
            reasons.append(f"theorem statement changed: {stmt_got[:200]!r} is not {stmt_want[:200]!r}")
        else:
            reasons.append("text before the theorem differs from the formalisation "
                           "(added declarations, axioms, notation or options are not allowed)")
        return None, reasons
    return submission.rstrip() + f"\n\n#print axioms {theorem}\n", reasons


_AXIOMS = re.compile(r"^'(?P<name>[^']+)' (?:depends on axioms: \[(?P<axs>[^\]]*)\]|does not depend on any axioms)")


def parse_axioms(messages: Sequence[LeanMessage], theorem: str = DEFAULT_THEOREM) -> list[str] | None:
    """The axioms ``#print axioms theorem`` reported (None when no report came back)."""
    for m in messages:
        hit = _AXIOMS.match(m.data.strip())
        if hit and hit.group("name").split(".")[-1] == theorem.split(".")[-1]:
            axs = hit.group("axs")
            return [a.strip() for a in axs.split(",") if a.strip()] if axs is not None else []
    return None


@dataclass(frozen=True)
class Acceptance:
    """The verdict on one proof: accepted, rejected (with every reason), or inconclusive."""

    outcome: Literal["accepted", "rejected", "inconclusive"]
    reasons: tuple[str, ...] = ()
    axioms: tuple[str, ...] | None = None

    @property
    def accepted(self) -> bool:
        return self.outcome == "accepted"


def judge_run(run: LeanRun, theorem: str = DEFAULT_THEOREM) -> Acceptance:
    """Rules 2-4 on what Lean said about a source built by ``build_source``."""
    if any(INIT_MISSING in m.data for m in run.messages) or (run.error and INIT_MISSING in run.error):
        return Acceptance("inconclusive", ("lean cannot find its core library (Init): the toolchain is incomplete",))
    if run.status != "ok":
        return Acceptance("inconclusive", (f"lean check {run.status}: {run.error or 'no detail'}",))
    reasons = [f"error {m.line}:{m.column}: {m.data[:300]}" for m in run.messages if m.severity == "error"]
    if run.sorries or any(m.data.strip() in SORRY_WARNINGS for m in run.messages):
        reasons.append("uses sorry")
    if any(m.data.strip() == EXIT_WARNING for m in run.messages):
        reasons.append("uses #exit")
    axioms = parse_axioms(run.messages, theorem)
    if axioms is None:
        reasons.append(f"no '#print axioms {theorem}' report (Lean stopped early)")
    else:
        bad = [a for a in axioms if a not in ALLOWED_AXIOMS]
        if bad:
            reasons.append(f"depends on axioms outside {{propext, Classical.choice, Quot.sound}}: {bad}")
    return Acceptance("rejected" if reasons else "accepted", tuple(reasons),
                      tuple(axioms) if axioms is not None else None)


def check_proofs(
    checker: LeanChecker, pairs: Sequence[tuple[str, str]], theorem: str = DEFAULT_THEOREM
) -> list[Acceptance]:
    """Apply the whole rule to each (formalisation, submission); one batched Lean call for the texts that
    pass rule 1."""
    built = [build_source(formal, sub, theorem) for formal, sub in pairs]
    todo = [i for i, (src, _) in enumerate(built) if src is not None]
    runs = checker.run_many([built[i][0] for i in todo]) if todo else []  # type: ignore[misc]
    out = [Acceptance("rejected", tuple(r)) for _, r in built]
    for i, run in zip(todo, runs, strict=True):
        out[i] = judge_run(run, theorem)
    return out
