"""JURY-RL commands: check a Lean proof under the proof gate's acceptance rule, and diagnose the Lean setup.

Plain functions with typer annotations; the lead wires them into ``cli/app.py`` as ``lean-check`` and
``lean-doctor``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rewardkit.cli.common import fail


def lean_check(
    proof: Annotated[Path, typer.Argument(help="Lean file with the proof (the whole submission).")],
    formal: Annotated[Path, typer.Argument(help="Lean file with the formal statement (proof may be sorry).")],
    lean: Annotated[str, typer.Option(help="auto, a path to lean, repl:<command>, or a Kimina server URL.")] = "auto",
    theorem: Annotated[str, typer.Option(help="Name of the theorem to check.")] = "test_problem",
) -> None:
    """Check a proof: statement unchanged, no error, no sorry, axioms within propext/Classical.choice/Quot.sound."""
    from rewardkit.jury.lean import check_proofs, make_checker
    from rewardkit.jury.lean.subprocess import LeanToolchainError

    texts = []
    for path in (formal, proof):  # read first: a bad file is named before any checker starts
        try:
            texts.append(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError as e:
            raise fail(f"{path}: not valid UTF-8 (byte {e.start}: {e.object[e.start:e.start + 1]!r}); "
                       "a Lean file is UTF-8 text") from None
    try:
        checker = make_checker(lean)
    except (LeanToolchainError, ValueError) as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(2) from None
    try:
        (a,) = check_proofs(checker, [tuple(texts)], theorem)
    finally:
        checker.close()
    typer.echo(json.dumps({"outcome": a.outcome, "reasons": list(a.reasons), "axioms": a.axioms}, indent=1))
    raise typer.Exit(0 if a.accepted else 1)


def lean_doctor(
    lean: Annotated[str, typer.Option(help="auto, a path to lean, repl:<command>, or a Kimina server URL.")] = "auto",
) -> None:
    """Say which Lean check backend would be used, or exactly why none is usable and how to configure one."""
    from rewardkit.jury.lean import make_checker
    from rewardkit.jury.lean.subprocess import LeanToolchainError

    try:
        checker = make_checker(lean)
    except (LeanToolchainError, ValueError) as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(1) from None
    where = getattr(checker, "exe", None) or getattr(checker, "url", None) or " ".join(getattr(checker, "cmd", []))
    if hasattr(checker, "health") and not checker.health():
        typer.echo(f"{checker.name}: {where} is not answering GET /health", err=True)
        raise typer.Exit(1)
    typer.echo(f"{checker.name}: {where}")
    checker.close()
