"""Shared helpers for benchmark scripts: the shared rollouts path, machine facts, writing results."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

from rewardkit.evals.data import rollouts_path  # noqa: F401  (re-exported for the scripts)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def machine() -> dict:
    return {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count()}


def write_results(name: str, data: dict, markdown: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(markdown.rstrip() + "\n")
