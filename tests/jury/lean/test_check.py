"""The acceptance rule, end to end through the stand-in `lean --json` (real message formats)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rewardkit.jury.lean.check import (
    DEFAULT_HEADER,
    LeanMessage,
    LeanRun,
    build_source,
    check_proofs,
    forbidden_commands,
    judge_run,
    parse_axioms,
    qualified_name,
    require_settings,
    statement_end,
    strip_comments,
    with_sorry,
)
from rewardkit.jury.lean.subprocess import LeanSubprocess, parse_json_lines

STANDINS = Path(__file__).resolve().parents[2] / "lean_standins"
LEAN = str(STANDINS / "lean")

STATEMENT = "theorem test_problem (x : ℕ) (h : x + 2 = 5) : x = 3"
FORMAL = DEFAULT_HEADER + "\n" + STATEMENT + " := by\n  sorry\n"


def proof(body: str, statement: str = STATEMENT, before: str = "") -> str:
    return DEFAULT_HEADER + "\n" + before + statement + " := by\n" + body


@pytest.fixture(scope="module")
def lean():
    return LeanSubprocess(LEAN, timeout=30)


def verdict(lean, submission: str):
    return check_proofs(lean, [(FORMAL, submission)])[0]


def test_a_clean_proof_is_accepted(lean):
    a = verdict(lean, proof("  omega\n"))
    assert a.accepted, a.reasons
    assert set(a.axioms) == {"propext", "Classical.choice", "Quot.sound"}


def test_a_proof_without_header_gets_the_formalisations(lean):
    assert verdict(lean, STATEMENT + " := by\n  omega\n").accepted


@pytest.mark.parametrize("body", ["  sorry\n", "  admit\n", "  subst h\n  sorry\n"])
def test_sorry_and_admit_are_rejected(lean, body):
    a = verdict(lean, proof(body))
    assert a.outcome == "rejected" and "uses sorry" in a.reasons
    assert "sorryAx" in a.axioms


def test_old_sorry_spelling_is_rejected():
    old = LeanSubprocess(LEAN, env={"LEAN_STANDIN_OLD_SORRY": "1"}, probe=False)
    src, _ = build_source(FORMAL, proof("  sorry\n"))
    run = old.run(src)
    assert any(m.data == "declaration uses 'sorry'" for m in run.messages)
    assert "uses sorry" in judge_run(run, src).reasons


def test_added_axiom_is_rejected_by_text_and_by_axioms(lean):
    sub = proof("  exact (cheat).elim\n", before="axiom cheat : False\n\n")
    a = verdict(lean, sub)
    assert a.outcome == "rejected" and "text before the theorem differs" in a.reasons[0]
    # even if the preamble rule were bypassed, #print axioms exposes the axiom
    src = sub + "\n#print axioms _root_.test_problem\n"
    run = lean.run(src)
    assert parse_axioms(run.messages, "test_problem", src.count("\n")) == ["cheat"]
    assert any("outside {propext, Classical.choice, Quot.sound}" in r for r in judge_run(run, src).reasons)


def test_native_decide_is_rejected(lean):
    a = verdict(lean, proof("  native_decide\n"))
    assert a.outcome == "rejected"
    assert any("Lean.ofReduceBool" in r for r in a.reasons)


@pytest.mark.parametrize("statement", [
    "theorem test_problem (x : ℕ) (h : x + 2 = 5) : x = 3 ∨ True",  # weakened
    "theorem test_problem (x : ℕ) (h : x + 2 = 5) (h' : False) : x = 3",  # extra hypothesis
    "theorem test_problem (x : ℤ) (h : x + 2 = 5) : x = 3",  # retyped
])
def test_changed_statement_is_rejected(lean, statement):
    a = verdict(lean, proof("  omega\n", statement=statement))
    assert a.outcome == "rejected" and a.reasons[0].startswith("theorem statement changed")


def test_statement_whitespace_and_comments_do_not_matter(lean):
    spaced = "theorem test_problem (x : ℕ)  -- the unknown\n    (h : x + 2 = 5) :\n  x = 3"
    assert verdict(lean, proof("  omega\n", statement=spaced)).accepted


def test_exit_is_rejected(lean):
    a = verdict(lean, proof("  omega\n#exit\n"))
    line = proof("  omega\n#exit\n").split("\n").index("#exit") + 1
    assert a.outcome == "rejected" and f"line {line}, column 0: '#exit' stands at column 0" in a.reasons[0]
    # and if it reached Lean, the appended report never comes: rejected on what Lean said
    src = proof("  omega\n#exit\n") + "\n#print axioms _root_.test_problem\n"
    b = judge_run(lean.run(src), src)
    assert b.outcome == "rejected" and "uses #exit" in b.reasons
    assert any("no '#print axioms test_problem' report" in r for r in b.reasons)


def test_lean_error_is_rejected_with_its_position(lean):
    a = verdict(lean, proof("  exact no_such_lemma\n"))
    assert a.outcome == "rejected"
    line = DEFAULT_HEADER.count("\n") + 3  # header, blank line, statement, then the tactic line
    assert a.reasons[0] == f"error {line}:8: Unknown identifier `no_such_lemma`"


def test_timeouts_and_crashes_are_inconclusive_never_accepted():
    src = build_source(FORMAL, proof("  omega\n"))[0]
    assert judge_run(LeanRun(status="timeout", error="x"), src).outcome == "inconclusive"
    assert judge_run(LeanRun(status="error", error="crash"), src).outcome == "inconclusive"
    init = LeanRun([LeanMessage("error", "unknown module prefix 'Init'\n\nNo directory 'Init'")])
    assert judge_run(init, src).outcome == "inconclusive"


def test_json_lines_are_real_lean_format():
    # the stand-in's line for a sorry is byte for byte what Lean 4.35 prints for the same input
    out = subprocess.run([LEAN, "--json", "--stdin"], input="theorem foo : 1 + 1 = 2 := by sorry\n",
                         capture_output=True, text=True).stdout.splitlines()
    assert out[0] == ('{"caption":"","data":"declaration uses `sorry`","endPos":{"column":11,"line":1},'
                      '"fileName":"<stdin>","isSilent":false,"keepFullRange":false,"kind":"hasSorry",'
                      '"pos":{"column":8,"line":1},"severity":"warning"}')
    (m,), bad = parse_json_lines("\n".join(out))
    assert bad == []
    assert (m.severity, m.line, m.column, m.end_line, m.end_column) == ("warning", 1, 8, 1, 11)


def test_print_axioms_sorted_like_lean():
    out = subprocess.run([LEAN, "--json", "--stdin"], input="theorem foo : True := by\n  simp\n  sorry\n#print axioms foo\n",
                         capture_output=True, text=True).stdout.splitlines()
    info = json.loads(out[-1])
    assert info["data"] == "'foo' depends on axioms: [propext, sorryAx, Classical.choice, Quot.sound]"
    assert (info["pos"], info["endPos"], info["severity"]) == ({"column": 0, "line": 4}, {"column": 6, "line": 4}, "information")


def test_text_helpers():
    assert strip_comments("a -- b\n/- c /- d -/ e -/f") == "a     \n                 f"
    start, end = statement_end(FORMAL)
    assert FORMAL[start:end].strip() == STATEMENT
    assert with_sorry(proof("  omega\n")).endswith(STATEMENT + " := by\n  sorry\n")
    assert build_source(FORMAL, "theorem other : True := trivial")[1] == ["the proof has no theorem named 'test_problem'"]


def test_standin_is_executable_python():
    assert Path(LEAN).stat().st_mode & 0o111
    r = subprocess.run([sys.executable, LEAN, "--version"], capture_output=True, text=True)
    assert r.stdout.startswith("Lean (version 4.")


# ------------------------------------------------------------- forged axiom reports, commands after the proof

NATIVE = proof("  native_decide\n")
DECOY = "theorem decoy.test_problem : True := trivial\n#print axioms decoy.test_problem\n"
FAKE = "'test_problem' does not depend on any axioms"


@pytest.mark.parametrize("after", [
    DECOY,  # a decoy declaration whose last name component matches, with its own clean report
    f'#print "{FAKE}"\n',  # text imitating the report
    f'#eval IO.println "{FAKE}"\n',  # printed output imitating it
    DECOY + f'#print "{FAKE}"\n',
])
def test_forged_axiom_reports_do_not_hide_native_decide(lean, after):
    a = verdict(lean, NATIVE + after)
    assert a.outcome == "rejected" and "not allowed after the statement" in a.reasons[0]


@pytest.mark.parametrize("after", [DECOY, f'#print "{FAKE}"\n', f'#eval IO.println "{FAKE}"\n'])
def test_the_report_is_read_only_from_the_appended_command(lean, after):
    """Past the static rule (as if it had a gap): Lean runs the forgeries, the verdict still reads the report
    of exactly _root_.test_problem at the appended line, which lists the native_decide axioms."""
    src = build_source(FORMAL, NATIVE)[0]
    forged = src.replace("#print axioms _root_.", after + "\n#print axioms _root_.")
    run = lean.run(forged)
    assert any(FAKE in m.data or "'decoy.test_problem'" in m.data for m in run.messages)  # the forgery was there
    a = judge_run(run, forged)
    assert a.outcome == "rejected" and "Lean.ofReduceBool" in a.axioms
    # without the checker's own command last, no report counts at all
    tail = NATIVE + after
    b = judge_run(lean.run(tail), tail)
    assert b.outcome == "rejected" and b.axioms is None


def test_only_one_message_at_the_report_line_counts():
    src = build_source(FORMAL, proof("  omega\n"))[0]
    line = src.count("\n")
    ok = LeanMessage("information", "'test_problem' depends on axioms: [propext]", line, 0)
    assert parse_axioms([ok], "test_problem", line) == ["propext"]
    assert parse_axioms([ok], "decoy.test_problem", line) is None  # exact name, not its last component
    assert parse_axioms([LeanMessage("information", ok.data, line - 1, 0)], "test_problem", line) is None
    assert parse_axioms([ok, LeanMessage("information", FAKE, line, 0)], "test_problem", line) is None  # ambiguous
    assert parse_axioms([LeanMessage("warning", ok.data, line, 0)], "test_problem", line) is None
    wrapped = LeanMessage("information", "'test_problem' depends on axioms: [propext,\n Classical.choice,\n Quot.sound]",
                          line, 0)  # Lean wraps long reports
    assert parse_axioms([wrapped], "test_problem", line) == ["propext", "Classical.choice", "Quot.sound"]


@pytest.mark.parametrize("body", [
    "  omega\n#eval IO.FS.writeFile \"/tmp/pwned\" \"\"\n",
    "  set_option debug.skipKernelTC true in\n  omega\n",
    "  set_option maxHeartbeats 0 in omega\n",
    "  omega\nrun_cmd Lean.logInfo \"x\"\n",
    "  run_tac do pure ()\n  omega\n",
    "  omega\nelab \"x\" : term => pure default\n",
    "  omega\nmacro \"x\" : tactic => `(tactic| rfl)\n",
    "  omega\nnotation \"x\" => 1\n",
    "  omega\nopen Nat\n",
    "  omega\nnamespace decoy\n",
    "  omega\naxiom cheat : False\n",
    "  exact \"--\" #eval 1\n",  # a string that only looks like a comment start hides nothing
    "  omega /- never closed\n",  # would swallow the appended command
    "  omega\n#exit\n",
    # the {...} of an interpolated string is a term Lean elaborates: commands there run (before: blanked)
    '  have := s!"{run_tac pure ()}"\n  omega\n',
    '  have := m!"checked {by_elab pure default}"\n  omega\n',
    '  have := f!"{(set_option debug.skipKernelTC true in 0)}"\n  omega\n',
    '  have := s!"a {s!"b {(run_tac pure ())}"} c"\n  omega\n',  # nested interpolations
    '  have := s!"{"--"}" #eval 1\n  omega\n',  # a comment-looking string inside braces hides nothing
    '  have := throwError "{x}"\n  omega\n',  # other syntaxes interpolate plain-looking strings: refused
])
def test_commands_after_the_statement_are_refused_before_lean_runs(body):
    seen = []

    class Recorder:
        name = "recorder"

        def run_many(self, sources):
            seen.extend(sources)
            return [LeanRun() for _ in sources]

        def close(self):
            pass

    (a,) = check_proofs(Recorder(), [(FORMAL, proof(body))])
    assert a.outcome == "rejected" and seen == []  # Lean never saw it, so nothing in it ran on the host


@pytest.mark.parametrize("body", [
    "  open Finset in\n  omega\n",  # scoped to the next tactic: allowed
    "  omega -- #eval and theorem in a comment\n",
    "  /- #print axioms, set_option -/ omega\n",
    '  have _h : s!"{x + 1}" = s!"{x + 1}" := rfl\n  omega\n',  # interpolating terms is fine
    '  have _h : r"{run_tac}" = r"{run_tac}" := rfl\n  omega\n',  # raw strings do not interpolate
])
def test_ordinary_proofs_pass_the_command_rule(lean, body):
    assert forbidden_commands(body) == []
    assert verdict(lean, proof(body)).accepted


def test_the_appended_command_names_the_fully_qualified_theorem():
    assert build_source(FORMAL, proof("  omega\n"))[0].endswith("\n\n#print axioms _root_.test_problem\n")
    formal = "import Mathlib\nnamespace Foo\nsection\nopen Nat\nend\ntheorem test_problem : True := by\n  sorry\n"
    assert qualified_name(formal) == "Foo.test_problem"
    assert build_source(formal, formal.replace("sorry", "trivial"))[0].endswith("_root_.Foo.test_problem\n")


class Counting:
    """A check backend that answers every source with ``answer(source)`` and records every call, empty ones too."""

    name = "counting"

    def __init__(self, answer=lambda source: LeanRun(), drop: int = 0) -> None:
        self.calls: list[list[str]] = []
        self.answer, self.drop = answer, drop

    def run_many(self, sources):
        self.calls.append(list(sources))
        runs = [self.answer(s) for s in sources]
        return runs[: len(runs) - self.drop]

    def close(self):
        pass


def test_another_theorem_is_built_checked_and_reported_under_its_own_namespace():
    """``theorem=`` reaches every step: the statement found, the appended report's fully qualified name (the
    formalisation's namespace, not ``test_problem``'s absence), and the report read for that name."""
    formal = "import Mathlib\nnamespace Foo\ntheorem my_thm : True := by\n  sorry\n"
    assert qualified_name(formal, "my_thm") == "Foo.my_thm"
    assert with_sorry(formal.replace("sorry", "trivial"), "my_thm") == formal  # the prover prompt's statement
    # Lean's own report, written by hand: one information message at the appended line, column 0
    report = lambda src: LeanRun([LeanMessage("information", "'Foo.my_thm' depends on axioms: [propext]",  # noqa: E731
                                              src.count("\n"), 0)])
    lean = Counting(report)
    (a,) = check_proofs(lean, [(formal, formal.replace("sorry", "trivial"))], "my_thm")
    assert lean.calls[0][0].endswith("\n\n#print axioms _root_.Foo.my_thm\n")
    assert a.accepted and a.axioms == ("propext",) and a.lean_ran, a


def test_lean_is_not_called_when_every_text_is_refused_and_says_which_texts_it_ran():
    lean = Counting()
    verdicts = check_proofs(lean, [(FORMAL, proof("  omega\n#eval 1\n")), (FORMAL, "theorem other : True := trivial")])
    assert lean.calls == [] and [a.lean_ran for a in verdicts] == [False, False]
    ran = check_proofs(lean, [(FORMAL, proof("  omega\n#eval 1\n")), (FORMAL, proof("  omega\n"))])
    assert len(lean.calls) == 1 and [a.lean_ran for a in ran] == [False, True]


def test_a_checker_that_loses_a_run_is_an_error_naming_it():
    """Before, a zip error (or, unchecked, a verdict paired with another text)."""
    with pytest.raises(RuntimeError, match="Lean checker 'counting' returned 1 runs for 2 sources"):
        check_proofs(Counting(drop=1), [(FORMAL, proof("  omega\n")), (FORMAL, proof("  simp\n"))])

    class Unnamed:  # a checker without the protocol's `name`: named by its class
        def run_many(self, sources):
            return []

    with pytest.raises(RuntimeError, match="Lean checker 'Unnamed' returned 0 runs for 1 sources"):
        check_proofs(Unnamed(), [(FORMAL, proof("  omega\n"))])


# ------------------------------------------------------------- issue 35: only the proof may follow the statement


class Recorder:
    """A check backend that records what it was asked to run (Lean must never see a refused text)."""

    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def run_many(self, sources):
        self.seen.extend(sources)
        return [LeanRun() for _ in sources]

    def close(self):
        pass


ISSUE_STATEMENT = "theorem test_problem (x : ℕ) (h : x + 1 = 2) : x = 1 :="
ISSUE_FORMAL = DEFAULT_HEADER + "\n" + ISSUE_STATEMENT + " by\n  sorry\n"
NINE = ["simproc", "dsimproc", "notation3", "binder_predicate", "unif_hint", "init_quot", "grind_pattern",
        "gen_injective_theorems%", "variable?"]


def refused_at(after_statement: str) -> str:
    """The gate's reason for ``ISSUE_STATEMENT`` + ``after_statement``, checking Lean never saw the text."""
    rec = Recorder()
    (a,) = check_proofs(rec, [(ISSUE_FORMAL, DEFAULT_HEADER + "\n" + ISSUE_STATEMENT + after_statement)])
    assert a.outcome == "rejected" and rec.seen == [], a
    return a.reasons[0]


def test_the_issue_35_interpolated_raw_string_submission_is_refused():
    """``s!"{r"\\"}" ++ r"\\"``: Lean reads raw strings holding a backslash, so ``#eval`` stands at column 0."""
    why = refused_at(' by\n  have := s!"{r"\\"}" ++ r"\\"\n  omega\n#eval IO.println "}"\n')
    assert "line 11, column 0: '#eval' stands at column 0" in why, why


def test_a_raw_string_with_300_hashes_hides_no_command():
    raw = "r" + "#" * 300 + '"\\"' + "#" * 300
    why = refused_at(f' by\n  have := {raw}\n  omega\n#eval IO.println "x" -- "\n')
    assert "line 11, column 0: '#eval'" in why, why


@pytest.mark.parametrize("word", NINE + ["frobnicate_cmd", "my_new_command%", "where"])
def test_any_token_at_column_zero_after_the_statement_is_refused(word):
    """A command position, whatever the word: the nine the deny-list missed and words no list holds."""
    why = refused_at(f" by\n  omega\n{word} foo\n")
    assert f"line 10, column 0: {word!r} stands at column 0" in why, why


@pytest.mark.parametrize("word", NINE)
def test_the_nine_commands_indented_are_refused(word):
    """Indented, the proof's term ends and Lean parses a command there too."""
    why = refused_at(f" by\n  omega\n  {word} foo\n")
    assert f"line 10, column 2: {word}" in why, why


@pytest.mark.parametrize("after, where", [
    (" by\n  let rec @[implemented_by pwn] f : ℕ → ℕ := id\n  omega\n", "line 9, column 10: @["),
    (' by\n  omega\n  where @[extern "system"] f : ℕ → ℕ := id\n', "line 10, column 8: @["),
    (" by\n  have h2 : x = 1 := by\n    @[simp] theorem t : True := trivial\n  omega\n", "line 10, column 4: @["),
    (" by omega /-- a docstring -/\n", "line 8, column 65: /--"),  # on the statement's own line
    (" by\n  omega\n  /-! a module doc, which is a command -/\n", "line 10, column 2: /-!"),
    (" by\n  omega\n\t#eval 1\n", "line 10, column 0: a tab"),  # Lean refuses tabs, then recovers
])
def test_attributes_doc_comments_and_tabs_inside_a_proof_are_refused(after, where):
    why = refused_at(after)
    assert where in why, why


REAL_PROOFS = [
    " by\n  omega\n",
    " by\n  have h₁ : x = 1 := by\n    omega\n  -- the key step: #eval, theorem and def in a comment\n  exact h₁\n",
    " by\n  nlinarith [sq_nonneg (x - 1), sq_nonneg (x + 1), h, mul_pos (by norm_num : (0:ℝ) < 2) one_pos]\n",
    " by\n  calc x = (x + 1) - 1 := by omega\n    _ = 2 - 1 := by rw [h]\n    _ = 1 := by norm_num\n",
    " by\n  match x, h with\n  | 0, h => simp at h\n  | n + 1, h => omega\n",
    "\n  Nat.succ_injective (by simpa using h)\n",
    "\n  (fun (y : ℕ) (hy : y + 1 = 2) => by omega) x h\n",
    " by\n  rcases Nat.even_or_odd x with ⟨k, rfl⟩ | ⟨k, rfl⟩ <;> omega\n",
    " by\n  constructor <;> intro hx\n  · linarith\n  · nlinarith [hx]\n",
    " by\n  show x = 1\n  have : x + 1 = 1 + 1 := by simpa using h\n  exact Nat.add_right_cancel this\n",
    " by\n  exact aux x h\n  where\n    aux (y : ℕ) (hy : y + 1 = 2) : y = 1 := by omega\n",
    " by\n  let rec go : ℕ → ℕ\n    | 0 => 0\n    | n + 1 => go n\n  omega\n",
    " by\n  open Real in\n  simp only [Finset.sum_range_succ, Finset.sum_range_zero] at h ⊢\n  omega\n",
    " by\n  /- nested /- comment -/ with #eval -/\n  obtain ⟨k, hk⟩ : ∃ k, k = x := ⟨x, rfl⟩\n  subst hk\n  omega\n",
    " by\n  have e : s!\"{x} and {r#\"raw \"quoted\"\"#}\" = s!\"{x} and {r#\"raw \"quoted\"\"#}\" := rfl\n  omega\n",
    " by\n  have hs : (∑' n : ℕ, (0 : ℝ)) = 0 := tsum_zero\n  have hi : (fun n : ℕ => n) '' {0} = {0} := by simp\n  omega\n",
    " by\n  interval_cases x <;> simp_all\n",
    " by\n  refine ?_\n  norm_num [Nat.factorial] at h ⊢\n  omega\n",
]


@pytest.mark.parametrize("after", REAL_PROOFS)
def test_real_proof_shapes_pass_the_gate(after):
    """No false refusal: multi-line tactic blocks, calc, match, term-mode fun, have ... := by, show, bullets,
    <;>, comments, an indented where and let rec, open ... in, raw strings in interpolations, Mathlib's ∑' and ''."""
    sub = DEFAULT_HEADER + "\n" + ISSUE_STATEMENT + after
    source, reasons = build_source(ISSUE_FORMAL, sub)
    assert source is not None and reasons == [], reasons


@pytest.mark.parametrize("blank", ["\u00a0", "\u2003", "\u200b", "\u000c", "\u000b", "\u2028", "\ufeff"])
def test_characters_lean_cannot_read_hide_no_command(blank):
    """A no-break space, em space, zero-width space, form feed ... is no whitespace to Lean and starts no token:
    a lexical error, after which Lean reads on. Refused wherever it stands outside comments and literals."""
    why = refused_at(f" by\n  omega\n  {blank}frobnicate_cmd foo\n")
    assert "line 10, column 2: U+" in why, why


@pytest.mark.parametrize("after", [
    ' by\n  have := m!"{r#"\\"#}" ++ r#"\\"#\n  omega\n#eval 1 -- "\n',  # m!, one #
    ' by\n  have := s!"{s!"{r"\\"}"}" ++ r"\\"\n  omega\n#eval 1 -- "\n',  # nested interpolation
    ' by\n  have := s!"{ (r"\\") }" ++ r"\\"\n  omega\n  run_cmd pure () -- "\n',  # blanks, parentheses; indented
    ' by\n  have := f!"{\'"\'}" ++ "\\""\n  omega\n#eval 1 -- "\n',  # a character literal holding a quote
    ' by\n  have := s!"\\{r"\\"}" ++ "\\""\n  omega\n#eval 1 -- "\n',  # \\{ is no interpolation
    " by\n  have := r" + "#" * 1000 + '"\\"#"' + "#" * 1000 + "\n  omega\n#eval 1 -- \"\n",
    " by\n  have := r" + "#" * 257 + '"' + '"' + "#" * 256 + '\\"' + "#" * 257 + "\n  omega\n#eval 1 -- \"\n",
], ids=["m!", "nested", "blanks", "char", "escaped-brace", "1000#", "257#"])
def test_variants_of_the_issue_35_literals_hide_no_command(after):
    why = refused_at(after)
    assert re.search(r"line \d+, column \d+: ('#eval'|run_cmd)", why), why


@pytest.mark.parametrize("body, word", [
    ("  have := eval% (unsafeBaseIO (IO.FS.writeFile \"/tmp/p\" \"\") *> pure 1)\n  omega\n", "eval%"),
    ("  have : x + 0 = x := by plausible\n  omega\n", "plausible"),
    ("  have : x + 0 = x := by slim_check\n  omega\n", "slim_check"),
])
def test_proof_terms_that_run_the_submissions_code_are_refused(body, word):
    """Mathlib's ``eval%`` and the testers evaluate code while Lean elaborates; none of them proves a goal."""
    why = refused_at(" by\n" + body)
    assert re.search(rf"line 9, column \d+: {re.escape(word)} \(evaluates code", why), why


# ---- LeanRun.from_repl: a REPL command's answer (leanprover-community/repl, also inside a Kimina result)

def test_a_repl_answer_becomes_a_run_with_its_lines_shifted_and_its_sorries_counted():
    # the REPL's response shape (DESIGN.md section 4): env, messages with pos/endPos/severity/data, sorries
    resp = {"env": 1,
            "messages": [{"severity": "warning", "pos": {"line": 2, "column": 8}, "endPos": {"line": 2, "column": 20},
                          "data": "declaration uses 'sorry'"},
                         {"severity": "error", "pos": {"line": 3, "column": 2}, "endPos": None,
                          "data": "unknown identifier 'foo'"}],
            "sorries": [{"pos": {"line": 2, "column": 30}, "endPos": {"line": 2, "column": 35}, "goal": "⊢ True",
                         "proofState": 0}]}
    run = LeanRun.from_repl(resp, 7, 1.5, "REPL")
    assert run == LeanRun([LeanMessage("warning", "declaration uses 'sorry'", 9, 8, 9, 20),
                           LeanMessage("error", "unknown identifier 'foo'", 10, 2, None, None)],
                          "ok", None, 1.5, sorries=1)
    # no messages and no sorries: a clean command
    assert LeanRun.from_repl({"env": 0}, 3, 0.25, "REPL") == LeanRun([], "ok", None, 0.25, sorries=0)


def test_a_repl_refusal_is_an_error_run_named_by_the_backend():
    # {"message": ...} without "env" is the REPL's own failure: no messages, the check is inconclusive
    run = LeanRun.from_repl({"message": "Unknown environment."}, 4, 0.5, "Kimina REPL")
    assert run == LeanRun([], "error", "Kimina REPL: Unknown environment.", 0.5)
    # a "message" beside an "env" is not a refusal: the command ran
    assert LeanRun.from_repl({"env": 2, "message": "x"}, 0, 0.1, "REPL").status == "ok"
    # nor is an answer without "message": a REPL answer with messages, read as such
    assert LeanRun.from_repl({"messages": []}, 0, 0.1, "REPL").status == "ok"


def test_a_lean_that_prints_nothing_leaves_the_proof_inconclusive():
    """A real Lean prints at least the appended report; a ``lean`` that exits 0 with no output (``/bin/true``, a
    broken wrapper) checked nothing. Before, each proof was rejected for want of its report, and the claim's
    'no proof accepted' cached as if Lean had judged it."""
    src = build_source(FORMAL, proof("  omega\n"))[0]
    run = LeanSubprocess("/bin/true", timeout=10, probe=False).run(src)
    assert run.status == "ok" and run.messages == [] and run.sorries == 0
    a = judge_run(run, src)
    assert a.outcome == "inconclusive" and "lean printed no message" in a.reasons[0] and a.lean_ran
    # one message, even without the report, is Lean having spoken: judged as before
    said = LeanRun([LeanMessage("warning", "unused variable `h`", 4, 0)])
    assert judge_run(said, src).outcome == "rejected"
    assert judge_run(LeanRun([], sorries=1), src).outcome == "rejected"


def test_require_settings_passes_unset_and_usable_values_and_names_the_first_bad_one():
    require_settings("C", "number", a=None, b=0.001, c=7, d=float("inf"))  # an infinite deadline is a choice
    require_settings("C", "count", a=None, b=1, c=64)
    require_settings("C", "count0", a=0, b=3)
    refused = [("number", {"t": 0}, "C: t=0: expected a number > 0"),
               ("number", {"t": -0.5}, "C: t=-0.5: expected a number > 0"),
               ("number", {"t": float("nan")}, "C: t=nan: expected a number > 0"),
               ("number", {"t": "5"}, "C: t='5': expected a number > 0"),
               ("number", {"t": True}, "C: t=True: expected a number > 0"),
               ("number", {"ok": 1, "bad": 0, "worse": -1}, "C: bad=0: expected a number > 0"),
               ("count", {"n": 0}, "C: n=0: expected a whole number >= 1"),
               ("count", {"n": 2.0}, "C: n=2.0: expected a whole number >= 1"),
               ("count", {"n": True}, "C: n=True: expected a whole number >= 1"),
               ("count0", {"n": -1}, "C: n=-1: expected a whole number >= 0"),
               ("count0", {"n": False}, "C: n=False: expected a whole number >= 0")]
    for kind, settings, says in refused:
        with pytest.raises(ValueError) as e:
            require_settings("C", kind, **settings)
        assert str(e.value) == says
