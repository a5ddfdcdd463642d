"""CI never skips for want of data: with ``CI`` set and a shared folder missing a data set, the run stops at once."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(shared: Path, ci: bool, *extra: str) -> subprocess.CompletedProcess:
    """A small pytest run in a subprocess with the given shared folder, as CI (``CI=true``) or as a developer."""
    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"REWARDKIT_SHARED": str(shared)}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra, "tests/test_types.py"],
                          cwd=ROOT, env=env | ({"CI": "true"} if ci else {}), capture_output=True, text=True,
                          timeout=300)


def test_ci_run_stops_when_shared_data_is_missing(tmp_path):
    (tmp_path / "data").mkdir()
    r = _run(tmp_path, ci=True)
    assert r.returncode == 3, r.stdout[-2000:]
    assert "math_cot_100.jsonl (shared data" in r.stdout + r.stderr


def test_a_developer_run_without_shared_data_still_runs(tmp_path):
    (tmp_path / "data").mkdir()
    r = _run(tmp_path, ci=False)
    assert r.returncode == 0, r.stdout[-2000:]


def test_a_no_skips_run_of_its_own_environment_is_not_held_to_the_main_runs_requirements(tmp_path):
    """vLLM's, the frameworks' and llama.cpp's environments run a subset with --no-skips (any skip fails it) and
    hold only that subset's packages: CI's requirement check is the main run's."""
    (tmp_path / "data").mkdir()
    r = _run(tmp_path, True, "--no-skips")
    assert r.returncode == 0, r.stdout[-2000:]
