"""The acceptance rule for a Lean 4 proof, and the message/run types every check backend returns.

A proof of the formal statement is accepted only if all of these hold (DESIGN.md section 4):
1. the submission's text up to the end of the theorem statement is the formalisation's own (statement
   identical; no added declarations, notation, macros or options before it), whitespace and comments aside;
2. Lean reports no error;
3. no ``sorry`` (both warning spellings, and any REPL ``sorries``; ``admit`` is reported as sorry);
4. after the statement comes only its proof, checked on the text as Lean's lexer reads it (``lexer.lex``)
   before Lean runs, so no submission code is evaluated on the host. An allow-list: the proof is tactic or
   term text indented under the statement, with the comments Lean allows. Refused, each naming line and
   column: any token at column 0 after the statement's line (a command position: whatever command it
   starts, listed or not), an attribute ``@[...]`` anywhere (``let rec @[implemented_by f]``, ``where
   @[extern "f"]``), a doc comment (``/--`` documents a declaration, ``/-!`` is a command), every command
   keyword Lean or Mathlib would parse where the proof's term ends (``#eval``, ``run_cmd``, ``simproc``,
   ``set_option``, declarations, ...; ``open ... in`` scoped to the next tactic is allowed), terms and tactics
   that evaluate the submission's code while Lean elaborates (``eval%``, ``plausible``, ``unsafeBaseIO``), and whatever
   the lexer cannot settle (``lexer.LeanLex.refusals``: unterminated literals or comments, invalid escapes,
   tabs, what it does not model inside an interpolation's ``{...}``). The ``{...}`` of ``s!``/``m!``/``f!``
   strings is code and is scanned as such; a ``{`` in any other string literal is refused
   (``throwError "{x}"`` interpolates too);
5. the checker appends ``#print axioms _root_.<fully qualified theorem>`` as the last line, and reads the
   report only from an information message at exactly that line naming exactly that declaration (a decoy
   ``theorem decoy.test_problem``, or output imitating the report, never counts); the theorem depends only
   on ``propext``, ``Classical.choice`` and ``Quot.sound`` (an injected ``axiom``, ``sorryAx`` or the
   ``native_decide`` axioms ``Lean.ofReduceBool``/``Lean.trustCompiler`` are rejected).
A check that did not finish (timeout, crash, missing toolchain) is inconclusive, never accepted.

What this does not cover: the elaborator and the kernel run in the same Lean process as the submission's
tactics, so the verdict trusts that process (a bug in a tactic or an elaborator extension could add an
unchecked declaration to the environment). Where that matters, re-check the accepted file's environment
with an independent kernel replay: ``lean4checker`` (``lake env lean4checker --fresh Module``) or
``leanchecker`` on the compiled ``.olean``; rewardkit does not run one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from rewardkit.jury.lean.lexer import ID_REST_CLASS, lex, place
from rewardkit.types import batch_call, lone_surrogate

ALLOWED_AXIOMS = frozenset({"propext", "Classical.choice", "Quot.sound"})
SORRY_WARNINGS = ("declaration uses 'sorry'", "declaration uses `sorry`")  # older / Lean >= 4.2x spelling
EXIT_WARNING = "using 'exit' to interrupt Lean"
INIT_MISSING = "unknown module prefix 'Init'"
DEFAULT_THEOREM = "test_problem"  # the name the C.5 autoformaliser prompt asks for
DEFAULT_HEADER = (
    "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\nopen BigOperators Real Nat Topology Rat\n"
)


SEVERITIES = ("information", "warning", "error")  # Lean's MessageSeverity as its JSON writes it
REPL_SEVERITIES = {"info": "information"}  # the REPL's own spelling (REPL/JSON.lean Severity), also Kimina's


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
        """From a ``lean --json`` line or a REPL/Kimina message (same pos/endPos/severity/data keys; the REPL
        writes Lean's ``information`` as ``info``). A message without one of Lean's three severities is refused
        (ValueError): read as none, an error would be lost."""
        severity = obj.get("severity")
        severity = REPL_SEVERITIES.get(severity, severity) if isinstance(severity, str) else severity
        if severity not in SEVERITIES:
            raise ValueError(f"a message whose severity is {obj.get('severity')!r}, not one of {', '.join(SEVERITIES)}")
        pos = obj.get("pos") or {}
        end = obj.get("endPos") or None
        return cls(
            severity, str(obj.get("data", "")),
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

    @classmethod
    def from_repl(cls, resp: dict[str, Any], line_offset: int, seconds: float, who: str) -> LeanRun:
        """A REPL command's answer (leanprover-community/repl's, also inside a Kimina result): its messages, lines
        shifted by ``line_offset``, or the REPL's own refusal (``{"message": ...}`` without ``env``) named by ``who``."""
        if "message" in resp and "env" not in resp:
            return cls(status="error", error=f"{who}: {resp['message']}", seconds=seconds)
        msgs = [LeanMessage.from_json(m, line_offset) for m in resp.get("messages", [])]
        return cls(msgs, "ok", None, seconds, sorries=len(resp.get("sorries", [])))


def unwritable(source: str) -> LeanRun | None:
    """An error run for a source no UTF-8 text can hold (a lone surrogate: a model's broken output), which every
    checker refuses before sending it, so that one check fails and not its batch; None for any other source."""
    at = lone_surrogate(source)
    if at is None:
        return None
    return LeanRun(status="error", error=f"the source holds a lone surrogate at character {at}, which no UTF-8 "
                                         "text (what lean reads) can hold")


_SETTINGS = {  # kind: (what passes, what the refusal says was expected); a bool is never a number here
    "number": (lambda v: isinstance(v, (int, float)) and v > 0, "a number > 0"),
    "count": (lambda v: isinstance(v, int) and v >= 1, "a whole number >= 1"),
    "count0": (lambda v: isinstance(v, int) and v >= 0, "a whole number >= 0"),
}


def require_settings(owner: str, kind: str, **settings: Any) -> None:
    """Refuse, naming ``owner`` and the setting, a value (None: unset) no check can run with: ``kind`` is "number"
    (> 0: a deadline or a size), "count" (a whole number >= 1) or "count0" (>= 0). A zero or negative deadline or
    limit is a mistake, never read as "unbounded", and is refused when the checker is made, not at its first proof."""
    passes, expected = _SETTINGS[kind]
    for name, value in settings.items():
        if value is not None and (isinstance(value, bool) or not passes(value)):
            raise ValueError(f"{owner}: {name}={value!r}: expected {expected}")


@runtime_checkable
class LeanChecker(Protocol):
    """A Lean check backend: ``run_many(sources) -> runs`` (lean subprocess, REPL, Kimina server)."""

    name: str

    def run_many(self, sources: Sequence[str]) -> list[LeanRun]: ...

    def close(self) -> None: ...


# ------------------------------------------------------------------------------------- source text


def _lex(code: str, blank_literals: bool) -> str:
    """Blank comments (``--``, nested ``/- -/``) and, with ``blank_literals``, the insides of string, char
    and ``«»`` name literals; same length, newlines kept. Read as Lean reads it (``lexer.lex``): a
    character stays whenever some reading of the token table or Lean version makes it code."""
    lx = lex(code)
    return lx.code if blank_literals else lx.no_comments


def strip_comments(code: str) -> str:
    """Blank out ``--`` and (nested) ``/- -/`` comments outside string literals, keeping length and newlines."""
    return lex(code).no_comments


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


# Keywords that start a command (or run code at elaboration time) in Lean 4, Batteries, Aesop and Mathlib, and so
# have no place inside a proof. A command at column 0 is refused whether listed or not; this list covers the
# places inside a line or indented where the proof's term ends and Lean's parser (or its error recovery, which
# skips token by token to the next command) starts a command.
_COMMAND_WORDS = (
    "theorem lemma def abbrev example instance axiom opaque structure inductive class mutual deriving "
    "namespace section end universe variable variable? export attribute import initialize builtin_initialize "
    "noncomputable private protected public meta nonrec partial unsafe omit include set_option open local scoped "
    "macro macro_rules syntax elab elab_rules notation notation3 infix infixl infixr prefix postfix "
    "declare_syntax_cat add_decl_doc run_cmd run_elab run_meta run_tac by_elab register_option "
    "register_builtin_option irreducible_def alias proof_wanted "
    "simproc dsimproc simproc_decl dsimproc_decl builtin_simproc builtin_dsimproc builtin_simproc_decl "
    "builtin_dsimproc_decl binder_predicate unif_hint init_quot grind_pattern gen_injective_theorems% "
    "reset_grind_attrs% compile_inductive% compile_def% seal unseal recall library_note assert_not_exists "
    "assert_not_imported suppress_compilation unsuppress_compilation initialize_simps_projections "
    "register_simp_attr register_label_attr add_aesop_rules erase_aesop_rules declare_aesop_rule_sets "
    "declare_config_elab declare_command_config_elab declare_simp_like_tactic mk_iff_of_inductive_prop "
    "register_tactic_tag tactic_extension coinductive whatsnew count_heartbeats extend_docs declare_uint_theorems "
    "declare_int_theorems declare_bitwise_uint_theorems declare_bitwise_int_theorems recommended_spelling "
    "register_linter_set register_try?_tactic simproc_pattern% grind_propagator builtin_grind_propagator "
    "show_panel_widgets register_error_explanation insert_to_additive_translation initialize_simps_projections? "
    "test_extern builtin_simproc_pattern% set_premise_selector prelude declare_aesop_exception "
    "register_aesop_check_option register_hint deprecate pp_extended_field_notation variables"
).split()
_COMMAND_SET = frozenset(_COMMAND_WORDS)
# a word is a keyword unless an identifier character (every Lean version's) or a dotted name runs into it; a
# `%`-token needs nothing after it
_COMMAND_RE = re.compile(rf"(?<![{ID_REST_CLASS}])(?<![{ID_REST_CLASS}»]\.)(?:("
                         + "|".join(re.escape(w) for w in _COMMAND_WORDS if w.endswith("%")) + ")|("
                         + "|".join(re.escape(w) for w in _COMMAND_WORDS if not w.endswith("%"))
                         + rf")(?![{ID_REST_CLASS}]))|(#[A-Za-z_]\w*)")
_ATTRIBUTE_OR_DOC = re.compile(r"@\[|/--|/-!")
# Tactics and terms that evaluate the submission's own code while Lean elaborates the proof, and never prove a
# goal themselves (``native_decide`` and ``Lean.ofReduceBool`` are left to rule 5's axiom report)
_EVALUATES = re.compile(rf"(?<![{ID_REST_CLASS}.])(eval%|(?:plausible|slim_check|unsafeBaseIO|unsafeIO|unsafeEIO)"
                        rf"(?![{ID_REST_CLASS}]))")
_NAME = rf"[{ID_REST_CLASS}.«»]+"
_OPEN_IN = re.compile(rf"open(?:\s+(?:scoped\s+)?{_NAME}(?:\s+hiding(?:\s+{_NAME})+)?)+\s+in(?![{ID_REST_CLASS}])")
_SKIP_KERNEL = "debug.skipKernelTC"


def forbidden_commands(proof: str, first_line: int = 1, first_column: int = 0) -> list[str]:
    """What the allow-list (rule 4) refuses in the text after the statement's ``:=``, each as ``line L, column
    C: what``, counting ``proof``'s first line as ``first_line`` starting at column ``first_column``: a token
    at column 0 of a later line, an attribute or doc comment, a command keyword wherever some reading of the
    text makes it a token (``1theorem`` is ``1`` then ``theorem``; the ``{...}`` of interpolated strings is
    code), a string with a ``{`` that is not an ``s!``/``m!``/``f!`` string (Lean may run its braces as code),
    and every place the lexer cannot settle. ``open NAMES in`` (scoped to the next tactic or term) is allowed."""
    lx = lex(proof)
    text = lx.code
    where = lambda i: place(proof, i, first_line, first_column)  # noqa: E731
    token = lambda i: proof[i:i + 24].split()[0] if proof[i:i + 24].split() else proof[i]  # noqa: E731
    found: dict[int, str] = {}
    for i, why in lx.refusals:
        found[i] = f"{where(i)}: {why}"
    for i in lx.ambiguous:
        found.setdefault(i, f"{where(i)}: '{{' in a string literal that is not s!/m!/f! (Lean may run it as code)")
    starts = set(lx.starts)
    for i in sorted(starts):
        if i > 0 and proof[i - 1] == "\n":
            found.setdefault(i, f"{where(i)}: {token(i)!r} stands at column 0, where Lean starts a new command "
                                f"(only the proof may follow the statement, indented under it)")
    for m in _ATTRIBUTE_OR_DOC.finditer(text):
        if m.start() in starts:
            what = "an attribute" if m.group(0) == "@[" else "a doc comment"
            found.setdefault(m.start(), f"{where(m.start())}: {m.group(0)} ({what}: declarations and commands "
                                        f"have no place in a proof)")
    for m in _EVALUATES.finditer(text):
        found.setdefault(m.start(), f"{where(m.start())}: {m.group(0)} (evaluates code while Lean checks the proof)")
    hits = [(m.start(), m.group(0)) for m in _COMMAND_RE.finditer(text)]
    hits += [(i, w) for i, w in lx.idents if w in _COMMAND_SET]
    for i, word in hits:
        if word == "open" and _OPEN_IN.match(text, i):
            continue
        found.setdefault(i, f"{where(i)}: {word}")
    out = [found[i] for i in sorted(found)]
    if _SKIP_KERNEL in text:
        out.append(_SKIP_KERNEL)
    return out


def qualified_name(formal: str, theorem: str = DEFAULT_THEOREM) -> str:
    """The theorem's fully qualified name: the namespaces open at its statement in the formalisation."""
    span = statement_end(formal, theorem)
    stack: list[list[str]] = []
    if span:
        text = strip_comments(formal[: span[0]])
        for m in re.finditer(r"^[ \t]*(namespace|section|end)\b[ \t]*([^\s]*)", text, re.M):
            kw, name = m.group(1), m.group(2)
            if kw == "namespace":
                stack.append(name.split("."))
            elif kw == "section":
                stack.append([])
            elif stack:
                stack.pop()
    if theorem.startswith("_root_."):
        return theorem[len("_root_."):]
    return ".".join([part for frame in stack for part in frame] + [theorem])


AXIOMS_COMMAND = "#print axioms _root_."


def build_source(formal: str, submission: str, theorem: str = DEFAULT_THEOREM) -> tuple[str | None, list[str]]:
    """The text Lean checks (the submission, then ``#print axioms _root_.<name>`` as its last line), or None
    with the textual reasons to reject it without running Lean (rules 1 and 4). A submission without imports
    gets the formalisation's preamble (everything before its theorem)."""
    reasons: list[str] = []
    want = formal_prefix(formal, theorem)
    if want is None:
        return None, [f"the formalisation has no theorem named {theorem!r}"]
    if not split_header(submission)[0]:  # a bare theorem: put it under the formalisation's preamble
        submission = formal[: statement_end(formal, theorem)[0]] + submission  # type: ignore[index]
    unsure = lex(submission).refusals
    if unsure:
        shown = "; ".join(f"{place(submission, i)}: {why}" for i, why in unsure[:3])
        return None, [f"the checker cannot tell how Lean reads the submission, so it is refused ({shown})"]
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
    extra = forbidden_commands(submission[span[1]:], submission.count("\n", 0, span[1]) + 1,
                               span[1] - submission.rfind("\n", 0, span[1]) - 1)
    if extra:
        shown = ", ".join(extra[:5]) + (f" and {len(extra) - 5} more" if len(extra) > 5 else "")
        return None, [f"the proof contains commands, options or meta-programs, which are not allowed after the "
                      f"statement ({shown})"]
    command = f"{AXIOMS_COMMAND}{qualified_name(formal, theorem)}\n"
    source = submission.rstrip() + "\n\n" + command
    if not _lex(source, blank_literals=True).endswith("\n" + command):  # swallowed by an open comment/literal
        return None, ["the proof ends inside an unterminated comment or literal"]
    return source, reasons


def _report_command(source: str) -> tuple[str, int] | None:
    """(declaration, 1-based line) of the ``#print axioms`` that ``build_source`` appended, if any."""
    lines = source.rstrip("\n").split("\n")
    last = lines[-1]
    if not last.startswith(AXIOMS_COMMAND) or not source.endswith("\n"):
        return None
    return last[len(AXIOMS_COMMAND):], len(lines)


_AXIOMS = re.compile(r"'(?P<name>[^']+)' (?:depends on axioms: \[(?P<axs>[^\]]*)\]|does not depend on any axioms)\Z")


def parse_axioms(messages: Sequence[LeanMessage], name: str, line: int) -> list[str] | None:
    """The axioms the report for exactly ``name`` lists, from the single information message at ``line``
    (the appended command), else None. Messages elsewhere, for other names, or imitations are ignored."""
    at = [m for m in messages if m.line == line]
    if len(at) != 1 or at[0].severity != "information" or at[0].column != 0:
        return None
    hit = _AXIOMS.match(at[0].data.strip())
    if not hit or hit.group("name") != name:
        return None
    axs = hit.group("axs")
    return [a.strip() for a in axs.split(",") if a.strip()] if axs is not None else []


@dataclass(frozen=True)
class Acceptance:
    """The verdict on one proof: accepted, rejected (with every reason), or inconclusive."""

    outcome: Literal["accepted", "rejected", "inconclusive"]
    reasons: tuple[str, ...] = ()
    axioms: tuple[str, ...] | None = None
    lean_ran: bool = False  # Lean checked the text (False: refused by rules 1 and 4 before it ran)

    @property
    def accepted(self) -> bool:
        return self.outcome == "accepted"


def judge_run(run: LeanRun, source: str) -> Acceptance:
    """Rules 2, 3 and 5 on what Lean said about ``source`` (a text built by ``build_source``)."""
    if any(INIT_MISSING in m.data for m in run.messages) or (run.error and INIT_MISSING in run.error):
        return Acceptance("inconclusive", ("lean cannot find its core library (Init): the toolchain is incomplete",),
                          lean_ran=True)
    if run.status != "ok":
        return Acceptance("inconclusive", (f"lean check {run.status}: {run.error or 'no detail'}",), lean_ran=True)
    cmd = _report_command(source)
    if cmd is None:
        return Acceptance("rejected", ("the checked text does not end with the checker's own '#print axioms' "
                                       "(build it with build_source)",), lean_ran=True)
    name, line = cmd
    if not run.messages and not run.sorries:  # Lean prints at least the report: what ran was not Lean checking it
        return Acceptance("inconclusive", ("lean printed no message, not even the '#print axioms' report (a lean "
                                           "that exits without checking?)",), lean_ran=True)
    reasons = [f"error {m.line}:{m.column}: {m.data[:300]}" for m in run.messages if m.severity == "error"]
    if run.sorries or any(m.data.strip() in SORRY_WARNINGS for m in run.messages):
        reasons.append("uses sorry")
    if any(m.data.strip() == EXIT_WARNING for m in run.messages):
        reasons.append("uses #exit")
    axioms = parse_axioms(run.messages, name, line)
    if axioms is None:
        reasons.append(f"no '#print axioms {name}' report at line {line} (Lean stopped early, or the report "
                       f"is missing or ambiguous)")
    else:
        bad = [a for a in axioms if a not in ALLOWED_AXIOMS]
        if bad:
            reasons.append(f"depends on axioms outside {{propext, Classical.choice, Quot.sound}}: {bad}")
    return Acceptance("rejected" if reasons else "accepted", tuple(reasons),
                      tuple(axioms) if axioms is not None else None, lean_ran=True)


def run_sources(checker: LeanChecker, sources: Sequence[str]) -> list[LeanRun]:
    """One batched Lean call (none for no source), one run per source (``types.batch_call``)."""
    return batch_call(checker.run_many, sources, f"Lean checker {getattr(checker, 'name', type(checker).__name__)!r}",
                      results="runs", of="sources")


def check_proofs(
    checker: LeanChecker, pairs: Sequence[tuple[str, str]], theorem: str = DEFAULT_THEOREM
) -> list[Acceptance]:
    """Apply the whole rule to each (formalisation, submission); one batched Lean call for the texts that
    pass rule 1."""
    built = [build_source(formal, sub, theorem) for formal, sub in pairs]
    todo = [i for i, (src, _) in enumerate(built) if src is not None]
    runs = run_sources(checker, [built[i][0] for i in todo])  # type: ignore[misc]
    out = [Acceptance("rejected", tuple(r)) for _, r in built]
    for i, run in zip(todo, runs):
        out[i] = judge_run(run, built[i][0])  # type: ignore[arg-type]
    return out
