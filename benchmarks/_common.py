"""Shared helpers for benchmark scripts: locating ../shared/data and writing results."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


from rewardkit.evals.data import data_path, rollouts_path, shared_dir  # noqa: E402,F401


def machine() -> dict:
    return {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count()}


def write_results(name: str, data: dict, markdown: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(markdown.rstrip() + "\n")
