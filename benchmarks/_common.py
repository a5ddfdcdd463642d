"""Shared helpers for benchmark scripts: locating ../shared/data and writing results."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def shared_dir() -> Path:
    """``$REWARDKIT_SHARED``, else the first ``shared/`` with ``data/`` beside a parent of this checkout."""
    if os.environ.get("REWARDKIT_SHARED"):
        return Path(os.environ["REWARDKIT_SHARED"])
    for parent in ROOT.parents:
        if (parent / "shared" / "data").is_dir():
            return parent / "shared"
    raise FileNotFoundError("cannot find shared/data; set REWARDKIT_SHARED")


def rollouts_path() -> Path:
    return shared_dir() / "data" / "math_rollouts_qwen25" / "math_cot_100.jsonl"


def machine() -> dict:
    return {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count()}


def write_results(name: str, data: dict, markdown: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(markdown.rstrip() + "\n")
