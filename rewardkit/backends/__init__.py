"""Judge backends behind one batched interface; ``load_backend(spec)`` picks one from a spec string."""

from __future__ import annotations

import threading
from typing import Any

from rewardkit.backends.base import (
    ChatRequest,
    Completion,
    JudgeBackend,
    VerdictRequest,
    VerdictResult,
    cost_of,
)

_LOADED: dict[tuple, JudgeBackend] = {}
_LOCK = threading.Lock()


def load_backend(spec: str | JudgeBackend = "smollm2", **options: Any) -> JudgeBackend:
    """A backend from a spec; the same spec and options return the same loaded instance (one model load).

    Specs: ``smollm2`` (the embedded SmolLM2-135M-Instruct), a local model directory or hub id
    (transformers).
    """
    if isinstance(spec, JudgeBackend):
        return spec
    key = (spec, tuple(sorted(options.items())))
    with _LOCK:
        if key not in _LOADED:
            from rewardkit.backends.transformers_backend import TransformersBackend

            _LOADED[key] = TransformersBackend(spec, **options)
        return _LOADED[key]


__all__ = ["ChatRequest", "Completion", "JudgeBackend", "VerdictRequest", "VerdictResult", "cost_of", "load_backend"]
