"""Benchmark results record no machine-specific absolute paths."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import rel_path, relativize  # noqa: E402
from rewardkit.evals.data import shared_dir  # noqa: E402


def test_paths_become_relative_to_the_repo_or_the_shared_folder():
    shared = shared_dir().resolve()
    assert rel_path(shared / "data" / "gsm8k" / "test.jsonl") == "../shared/data/gsm8k/test.jsonl"
    assert rel_path(ROOT / "benchmarks" / "results" / "x.json") == "benchmarks/results/x.json"
    cmd = f"rewardkit tts {shared}/data/a.jsonl --out {ROOT}/benchmarks/results/"
    assert relativize({"cmd": [cmd]}) == {"cmd": ["rewardkit tts ../shared/data/a.jsonl --out benchmarks/results/"]}


def test_committed_results_hold_no_absolute_paths_of_this_machine():
    # untracked results too (tests/test_layout.py checks tracked files for every machine's home folders)
    bases = [str(ROOT), str(shared_dir().resolve()), str(Path.home()) + "/", "/tmp/"]
    for f in sorted((ROOT / "benchmarks" / "results").glob("*")):
        if f.suffix not in (".json", ".md"):
            continue
        text = f.read_text()
        if f.suffix == ".json":
            json.loads(text)
        assert not [b for b in bases if b in text], f"{f.name} records an absolute path"
