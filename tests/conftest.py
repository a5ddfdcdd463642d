"""Shared fixtures: one loaded embedded model for the whole run, and paths to the shared data sets."""

from __future__ import annotations

from pathlib import Path

import pytest


def _find_shared() -> Path:
    from rewardkit.evals.data import shared_dir

    try:
        return shared_dir()
    except FileNotFoundError:
        return Path(__file__).resolve().parents[2] / "shared"


SHARED = _find_shared()
DATA = SHARED / "data"
ROLLOUTS = DATA / "math_rollouts_qwen25" / "math_cot_100.jsonl"


@pytest.fixture(scope="session")
def judge_backend():
    """The embedded SmolLM2-135M-Instruct (transformers, CPU, fp32), loaded once per test session."""
    from rewardkit.backends import load_backend

    return load_backend("smollm2", dtype="float32")  # fp32 on every CPU: exact comparisons between paths


@pytest.fixture(scope="session")
def rollouts_path() -> Path:
    if not ROLLOUTS.exists():
        pytest.skip(f"shared rollouts not found at {ROLLOUTS} (set REWARDKIT_SHARED to the shared/ folder)")
    return ROLLOUTS
