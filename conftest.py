"""Test-time import set-up: make this checkout's packages win, with `cli/` and `evals/` importable as
`rewardkit.cli` and `rewardkit.evals` (the mapping pyproject.toml applies at install time)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import rewardkit  # noqa: E402

if str(ROOT) not in rewardkit.__path__:
    rewardkit.__path__.append(str(ROOT))
