"""Judge backends behind one batched interface; ``load_backend(spec)`` picks one from a spec string.

Spec syntax (one string, so configs and CLIs can name a judge); any spec takes the backend's options
after ``?`` (``http://h:8000/v1?model=j&timeout=30&retries=3``, ``smollm2?dtype=bfloat16``), typed
from the backend's constructor (see ``rewardkit.backends.spec``):

=====================================  ===========================================================
``smollm2`` (``embedded``)             the embedded SmolLM2-135M-Instruct via transformers (CPU)
``PATH`` / ``hub-org/name``            any local model directory or hub id via transformers
``hf:PATH``                            the same, explicitly
``http://HOST:PORT/v1[?model=NAME]``   an OpenAI-compatible server (vLLM, SGLang, llama.cpp,
``https://...``                        ``rewardkit serve-judge``); without NAME the server's first
                                       model from ``/v1/models`` is used
``openai:NAME@URL``                    the same, model first (``openai:gpt-4o-mini@https://api.openai.com/v1``)
``vllm:MODEL``                         an offline ``vllm.LLM`` engine (GPU: ``rewardkit[vllm]``; CPU:
                                       vLLM's CPU build, ``scripts/vllm_cpu_env.sh``)
``llamacpp:PATH.gguf``                 llama-cpp-python on CPU (``rewardkit[llamacpp]``);
                                       ``llamacpp:smollm2`` is the embedded GGUF
=====================================  ===========================================================

Options are passed to the backend class; ``cache=True`` (or a path, or a ``JudgeCache``) puts the
persistent judge cache in front of it, as does the environment variable ``REWARDKIT_JUDGE_CACHE``
(``1`` for the default path, or a path).
"""

from __future__ import annotations

import os
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
from rewardkit.backends.spec import backend_options, declare_options, redact, shown_spec, split_spec

_LOADED: dict[tuple, JudgeBackend] = {}
_LOCK = threading.Lock()


def _backend_class(kind: str) -> type[JudgeBackend]:
    if kind == "http":
        from rewardkit.backends.http import HTTPBackend as cls
    elif kind == "vllm":
        from rewardkit.backends.vllm_backend import VLLMBackend as cls
    elif kind == "llamacpp":
        from rewardkit.backends.llamacpp_backend import LlamaCppBackend as cls
    else:
        from rewardkit.backends.transformers_backend import TransformersBackend as cls
    return cls


# every backend's options shown in any redacted spec, parsed yet or not (the classes import light; each engine
# is imported when its backend is built)
for _cls in map(_backend_class, ("transformers", "http", "vllm", "llamacpp")):
    declare_options(_cls)
del _cls


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``(kind, kwargs)`` for a backend spec string (grammar: ``rewardkit.backends.spec``), options typed."""
    kind, target, raw = split_spec(spec)
    kw: dict[str, Any] = {"base_url": target} if kind == "http" else {"model": target}
    if "model" in raw and kind != "http":
        raise ValueError(f"backend spec {shown_spec(spec)!r}: the model is {redact(target)!r}; 'model=' is for URLs")
    kw.update(backend_options(_backend_class(kind), raw, spec))
    return kind, kw


def _build(spec: str, options: dict[str, Any]) -> JudgeBackend:
    kind, kw = parse_spec(spec)
    for k, v in options.items():
        if k in kw and kw[k] != v:
            raise ValueError(f"backend spec {shown_spec(spec)!r} sets {k}={kw[k]!r} but {k}={v!r} was also passed")
        kw[k] = v
    return _backend_class(kind)(**kw)


def load_backend(spec: str | JudgeBackend = "smollm2", **options: Any) -> JudgeBackend:
    """A backend from a spec; the same spec and options return the same loaded instance (one model load).

    ``cache``: ``True`` / a path / a ``JudgeCache`` wraps the backend in the persistent judge cache
    (default: ``$REWARDKIT_JUDGE_CACHE`` when set, else no cache). See the module docstring for specs.
    """
    if isinstance(spec, JudgeBackend):
        return spec
    cache = options.pop("cache", None)
    if cache is None and os.environ.get("REWARDKIT_JUDGE_CACHE"):
        env = os.environ["REWARDKIT_JUDGE_CACHE"]
        cache = True if env.lower() in ("1", "true", "yes") else env
    if cache is False:
        cache = None
    key = (spec, tuple(sorted(options.items())), cache if not isinstance(cache, os.PathLike) else str(cache))
    with _LOCK:
        if key not in _LOADED:
            inner_key = (spec, tuple(sorted(options.items())), None)
            if inner_key not in _LOADED:
                _LOADED[inner_key] = _build(spec, dict(options))
            if cache is not None:
                from rewardkit.backends.cache import CachedBackend

                _LOADED[key] = CachedBackend(_LOADED[inner_key], None if cache is True else cache)
        return _LOADED[key]


def check_judge(spec: str | JudgeBackend, *, load: bool = True, **options: Any) -> JudgeBackend | None:
    """Make sure the judge a spec names can answer, before any work is queued for it.

    ``load=True``: load it (``load_backend``, so the scorer's later ``load_backend`` gets this instance) and
    ``check()`` it: a server URL must answer ``GET /models`` listing the model asked for. ``load=False`` (the
    judge loads elsewhere, e.g. on Ray workers): a URL is still asked, a local model is only located. Raises
    ``ValueError`` naming the spec; returns the loaded backend (None when not loaded).
    """
    if isinstance(spec, JudgeBackend):
        spec.check()
        return spec
    kind, kw = parse_spec(spec)
    try:
        if not load and kind != "http":
            _backend_class(kind).locate(kw["model"])
            return None
        backend = load_backend(spec, **options)
        backend.check()
    except (OSError, ImportError, RuntimeError) as e:  # ValueError already names the judge
        raise ValueError(f"judge {redact(spec)!r}: {e}") from None
    return backend


__all__ = [
    "ChatRequest", "Completion", "JudgeBackend", "VerdictRequest", "VerdictResult", "check_judge", "cost_of",
    "load_backend", "parse_spec",
]
