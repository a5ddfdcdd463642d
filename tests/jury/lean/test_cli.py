"""The JURY-RL CLI functions on a tiny typer app, with the stand-in `lean`."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rewardkit.cli.jury import lean_check, lean_doctor
from typer.testing import CliRunner

LEAN = str(Path(__file__).resolve().parents[2] / "lean_standins" / "lean")
FORMAL = "theorem test_problem (x : Nat) (h : x + 2 = 5) : x = 3 := by\n  sorry\n"


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("lean-check")(lean_check)
    app.command("lean-doctor")(lean_doctor)
    return app


def test_lean_check_accepts_and_rejects(tmp_path):
    (tmp_path / "f.lean").write_text(FORMAL)
    (tmp_path / "good.lean").write_text(FORMAL.replace("sorry", "omega"))
    (tmp_path / "bad.lean").write_text(FORMAL.replace("sorry", "native_decide"))
    r = CliRunner().invoke(_app(), ["lean-check", str(tmp_path / "good.lean"), str(tmp_path / "f.lean"), "--lean", LEAN])
    assert r.exit_code == 0 and json.loads(r.stdout)["outcome"] == "accepted"
    r = CliRunner().invoke(_app(), ["lean-check", str(tmp_path / "bad.lean"), str(tmp_path / "f.lean"), "--lean", LEAN])
    assert r.exit_code == 1 and "Lean.ofReduceBool" in json.loads(r.stdout)["reasons"][0]


def test_lean_check_names_a_file_it_cannot_read_before_any_checker_starts(tmp_path):
    """Before: a gzip (or Latin-1) proof file was 'error: 'utf-8' codec can't decode byte 0x8b in position 1',
    naming no file, and only after the checker had started; a missing file came after the toolchain search."""
    import gzip

    (tmp_path / "f.lean").write_text(FORMAL)
    (tmp_path / "p.lean.gz").write_bytes(gzip.compress(FORMAL.encode()))
    r = CliRunner().invoke(_app(), ["lean-check", str(tmp_path / "p.lean.gz"), str(tmp_path / "f.lean"),
                                    "--lean", str(tmp_path / "no-lean-here")])
    assert r.exit_code == 2 and r.stdout == "", r.output
    assert r.stderr == f"error: {tmp_path / 'p.lean.gz'}: not valid UTF-8 (byte 1: b'\\x8b'); a Lean file is UTF-8 text\n"
    r = CliRunner().invoke(_app(), ["lean-check", str(tmp_path / "f.lean"), str(tmp_path / "missing.lean"),
                                    "--lean", str(tmp_path / "no-lean-here")])
    assert isinstance(r.exception, FileNotFoundError) and r.exception.filename == str(tmp_path / "missing.lean")


def test_lean_doctor_explains_a_missing_toolchain(monkeypatch, tmp_path):
    monkeypatch.delenv("LEAN_EXE", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    r = CliRunner().invoke(_app(), ["lean-doctor"])
    assert r.exit_code == 1 and "LEAN_EXE (unset)" in r.output and "Kimina" in r.output
    r = CliRunner().invoke(_app(), ["lean-doctor", "--lean", LEAN])
    assert r.exit_code == 0 and r.output.startswith("lean-subprocess: ")
