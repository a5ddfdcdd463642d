"""The acceptance rule, end to end through the stand-in `lean --json` (real message formats)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rewardkit.lean.check import (
    DEFAULT_HEADER,
    LeanMessage,
    LeanRun,
    build_source,
    check_proofs,
    judge_run,
    parse_axioms,
    statement_end,
    strip_comments,
    with_sorry,
)
from rewardkit.lean.subprocess import LeanSubprocess, parse_json_lines

STANDINS = Path(__file__).parent / "lean_standins"
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
    assert "uses sorry" in judge_run(run).reasons


def test_added_axiom_is_rejected_by_text_and_by_axioms(lean):
    sub = proof("  exact (cheat).elim\n", before="axiom cheat : False\n\n")
    a = verdict(lean, sub)
    assert a.outcome == "rejected" and "text before the theorem differs" in a.reasons[0]
    # even if the preamble rule were bypassed, #print axioms exposes the axiom
    run = lean.run(sub + "\n#print axioms test_problem\n")
    assert parse_axioms(run.messages) == ["cheat"]
    assert any("outside {propext, Classical.choice, Quot.sound}" in r for r in judge_run(run).reasons)


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
    assert a.outcome == "rejected"
    assert "uses #exit" in a.reasons
    assert any("no '#print axioms test_problem' report" in r for r in a.reasons)


def test_lean_error_is_rejected_with_its_position(lean):
    a = verdict(lean, proof("  exact no_such_lemma\n"))
    assert a.outcome == "rejected"
    line = DEFAULT_HEADER.count("\n") + 3  # header, blank line, statement, then the tactic line
    assert a.reasons[0] == f"error {line}:8: Unknown identifier `no_such_lemma`"


def test_timeouts_and_crashes_are_inconclusive_never_accepted():
    assert judge_run(LeanRun(status="timeout", error="x")).outcome == "inconclusive"
    assert judge_run(LeanRun(status="error", error="crash")).outcome == "inconclusive"
    init = LeanRun([LeanMessage("error", "unknown module prefix 'Init'\n\nNo directory 'Init'")])
    assert judge_run(init).outcome == "inconclusive"


def test_json_lines_are_real_lean_format():
    # the stand-in's line for a sorry is byte for byte what Lean 4.35 prints for the same input
    out = subprocess.run([LEAN, "--json", "--stdin"], input="theorem foo : 1 + 1 = 2 := by sorry\n",
                         capture_output=True, text=True).stdout.splitlines()
    assert out[0] == ('{"caption":"","data":"declaration uses `sorry`","endPos":{"column":11,"line":1},'
                      '"fileName":"<stdin>","isSilent":false,"keepFullRange":false,"kind":"hasSorry",'
                      '"pos":{"column":8,"line":1},"severity":"warning"}')
    (m,) = parse_json_lines("\n".join(out))
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
