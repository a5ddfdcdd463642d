"""Shared helpers for benchmark scripts: the shared rollouts path, machine facts, writing results.

Results never record where they ran: paths are written relative to the repository, and files of the
shared data folder as ``../shared/data/...`` (the layout ``rewardkit.evals.data`` looks for).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import platform
import re
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rewardkit.evals.data import rollouts_path  # noqa: F401  (re-exported for the scripts)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def machine() -> dict:
    return {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count()}


def _bases() -> list[tuple[str, str]]:
    """(absolute prefix, relative replacement), longest first: the shared folder, then the repository."""
    bases = []
    try:
        from rewardkit.evals.data import shared_dir

        bases.append((str(shared_dir().resolve()), "../shared"))
    except FileNotFoundError:
        pass
    bases.append((str(ROOT), "."))
    return sorted(bases, key=lambda b: -len(b[0]))


def rel_path(p: str | Path) -> str:
    """``p`` relative to the repository (shared data as ``../shared/data/...``); other paths unchanged."""
    s = str(Path(p).resolve()) if Path(p).is_absolute() else str(p)
    for base, rel in _bases():
        if s == base or s.startswith(base + os.sep):
            return os.path.normpath(rel + s[len(base):]) if s != base else rel
    return str(p)


def relativize(x: Any) -> Any:
    """Every absolute path of the repository or the shared folder inside strings of ``x`` made relative."""
    if isinstance(x, dict):
        return {k: relativize(v) for k, v in x.items()}
    if isinstance(x, list):
        return [relativize(v) for v in x]
    if isinstance(x, str):
        for base, rel in _bases():
            x = x.replace(base + "/", "" if rel == "." else rel + "/")
            x = re.sub(re.escape(base) + r"(?![\w.-])", rel, x)
        return x
    return x


def write_results(name: str, data: dict, markdown: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(relativize(data), indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(relativize(markdown).rstrip() + "\n")


@contextlib.contextmanager
def checkout(ref: str | None) -> Iterator[Path]:
    """The repository at commit ``ref``, unpacked with ``git archive`` into a temporary folder (None: this
    checkout), so a benchmark can run the code before a fix the same way as the code after it."""
    if ref is None:
        yield ROOT
        return
    with tempfile.TemporaryDirectory(prefix="rewardkit-ref-") as tmp:
        archive = subprocess.run(["git", "archive", ref], cwd=ROOT, capture_output=True, check=True).stdout
        tarfile.open(fileobj=io.BytesIO(archive)).extractall(tmp, filter="data")
        yield Path(tmp)
