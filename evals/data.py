"""Where the shared public data sets live: ``$REWARDKIT_SHARED``, else a ``shared/`` folder with ``data/``
beside this checkout or one of its parents (the layout CI and the developer machines use)."""

from __future__ import annotations

import os
from pathlib import Path

_HERE = Path(__file__).resolve()


def shared_dir() -> Path:
    """The shared folder; raises FileNotFoundError naming what to set when there is none."""
    if os.environ.get("REWARDKIT_SHARED"):
        return Path(os.environ["REWARDKIT_SHARED"])
    for parent in [Path.cwd(), *Path.cwd().parents, *_HERE.parents]:
        if (parent / "shared" / "data").is_dir():
            return parent / "shared"
    raise FileNotFoundError("cannot find the shared data folder (shared/data beside the checkout); set REWARDKIT_SHARED")


def data_path(*parts: str) -> Path:
    """A path inside ``shared/data``, e.g. ``data_path("processbench")``."""
    return shared_dir().joinpath("data", *parts)


def rollouts_path() -> Path:
    """The 100 x 8 Qwen2.5-Math rollouts with correctness labels."""
    return data_path("math_rollouts_qwen25", "math_cot_100.jsonl")
