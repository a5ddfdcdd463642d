"""Real Lean 4: runs when a `lean` with its core library is found (LEAN_EXE, PATH, ~/.elan/bin), else
skips with the message a user would see. For `import Mathlib` checks set REWARDKIT_LEAN_MATHLIB to a
Lake project directory with Mathlib built (the checks then run with cwd there via `lake env lean`)."""

from __future__ import annotations

import os
import shutil

import pytest

from rewardkit.lean.check import check_proofs
from rewardkit.lean.subprocess import LeanSubprocess, LeanToolchainError


def _real_lean() -> LeanSubprocess:
    try:
        return LeanSubprocess(timeout=120)
    except LeanToolchainError as e:
        pytest.skip(f"no usable Lean toolchain: {e}")


@pytest.fixture(scope="module")
def lean() -> LeanSubprocess:
    return _real_lean()


HEADER = ""  # core Lean only: no Mathlib needed
FORMAL = "theorem test_problem (x : Nat) (h : x + 2 = 5) : x = 3 := by\n  sorry\n"


def proof(body: str, before: str = "") -> str:
    return before + "theorem test_problem (x : Nat) (h : x + 2 = 5) : x = 3 := by\n" + body


def test_real_lean_accepts_a_core_proof(lean):
    (a,) = check_proofs(lean, [(FORMAL, proof("  omega\n"))])
    assert a.accepted, a.reasons
    assert set(a.axioms or ()) <= {"propext", "Classical.choice", "Quot.sound"}


@pytest.mark.parametrize("body, reason", [
    ("  sorry\n", "uses sorry"),
    ("  admit\n", "uses sorry"),
    ("  omega\n#exit\n", "uses #exit"),
    ("  exact no_such_lemma\n", "error"),
])
def test_real_lean_rejects_hacks(lean, body, reason):
    (a,) = check_proofs(lean, [(FORMAL, proof(body))])
    assert a.outcome == "rejected" and any(r.startswith(reason) for r in a.reasons), a.reasons


def test_real_lean_exposes_native_decide_and_axioms(lean):
    src = "theorem t : 2 + 2 = 4 := by native_decide\n#print axioms t\n"
    run = lean.run(src)
    assert any("Lean.ofReduceBool" in m.data for m in run.messages)
    src = "axiom cheat : False\ntheorem t : 1 = 2 := cheat.elim\n#print axioms t\n"
    assert any("[cheat]" in m.data for m in lean.run(src).messages)


@pytest.mark.skipif(not os.environ.get("REWARDKIT_LEAN_MATHLIB"), reason="set REWARDKIT_LEAN_MATHLIB to a Lake project with Mathlib")
def test_real_mathlib_proof():
    lake = shutil.which("lake")
    if not lake:
        pytest.skip("no `lake` on PATH")
    lean = LeanSubprocess(timeout=600, cwd=os.environ["REWARDKIT_LEAN_MATHLIB"])
    lean.command = lambda: [lake, "env", "lean", "--json", "--stdin"]  # type: ignore[method-assign]
    formal = "import Mathlib\n\ntheorem test_problem (x : ℝ) (h : 2 * x = 6) : x = 3 := by\n  sorry\n"
    (a,) = check_proofs(lean, [(formal, formal.replace("sorry", "linarith"))])
    assert a.accepted, a.reasons
