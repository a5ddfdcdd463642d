"""Judge backends behind one batched interface; ``load_backend(spec)`` picks one from a spec string.

Spec syntax (one string, so configs and CLIs can name a judge):

=====================================  ===========================================================
``smollm2`` (``embedded``)             the embedded SmolLM2-135M-Instruct via transformers (CPU)
``PATH`` / ``hub-org/name``            any local model directory or hub id via transformers
``hf:PATH``                            the same, explicitly
``http://HOST:PORT/v1[#model=NAME]``   an OpenAI-compatible server (vLLM, SGLang, llama.cpp,
``https://...``                        ``rewardkit serve-judge``); without NAME the server's first
                                       model from ``/v1/models`` is used
``openai:NAME@URL``                    the same, model first (``openai:gpt-4o-mini@https://api.openai.com/v1``)
``vllm:MODEL``                         an offline ``vllm.LLM`` engine (GPU, ``rewardkit[vllm]``)
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

_LOADED: dict[tuple, JudgeBackend] = {}
_LOCK = threading.Lock()


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``(kind, kwargs)`` for a backend spec string; kind is transformers, http, vllm or llamacpp."""
    s = spec.strip()
    if not s:
        raise ValueError("empty backend spec: use e.g. 'smollm2', 'http://127.0.0.1:8000/v1', 'vllm:MODEL'")
    if s.startswith(("http://", "https://")):
        url, _, frag = s.partition("#")
        kw: dict[str, Any] = {"base_url": url}
        for part in filter(None, frag.split("&")):
            key, eq, val = part.partition("=")
            if key != "model" or not eq or not val:
                raise ValueError(f"backend spec {spec!r}: the URL fragment may only be '#model=NAME'")
            kw["model"] = val
        return "http", kw
    prefix, sep, rest = s.partition(":")
    if sep and prefix == "openai":
        name, at, url = rest.rpartition("@")
        if not at or not name or not url.startswith(("http://", "https://")):
            raise ValueError(f"backend spec {spec!r}: expected 'openai:MODEL@http(s)://HOST[:PORT]/v1'")
        return "http", {"base_url": url, "model": name}
    if sep and prefix == "vllm":
        if not rest:
            raise ValueError(f"backend spec {spec!r}: expected 'vllm:MODEL'")
        return "vllm", {"model": rest}
    if sep and prefix in ("llamacpp", "llama.cpp"):
        if not rest:
            raise ValueError(f"backend spec {spec!r}: expected 'llamacpp:PATH.gguf' or 'llamacpp:smollm2'")
        return "llamacpp", {"model": rest}
    if sep and prefix in ("hf", "transformers"):
        return "transformers", {"model": rest}
    return "transformers", {"model": s}


def _build(spec: str, options: dict[str, Any]) -> JudgeBackend:
    kind, kw = parse_spec(spec)
    kw.update(options)
    if kind == "http":
        from rewardkit.backends.http import HTTPBackend

        return HTTPBackend(**kw)
    if kind == "vllm":
        from rewardkit.backends.vllm_backend import VLLMBackend

        return VLLMBackend(**kw)
    if kind == "llamacpp":
        from rewardkit.backends.llamacpp_backend import LlamaCppBackend

        return LlamaCppBackend(**kw)
    from rewardkit.backends.transformers_backend import TransformersBackend

    return TransformersBackend(**kw)


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


__all__ = [
    "ChatRequest", "Completion", "JudgeBackend", "VerdictRequest", "VerdictResult", "cost_of", "load_backend",
    "parse_spec",
]
