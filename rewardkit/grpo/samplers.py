"""Where the trainer's rollouts are sampled: the policy itself (transformers) or a colocated vLLM engine.

``sampler=vllm`` creates one ``VLLMBackend`` engine in the trainer's process (TRL's ``vllm_mode="colocate"``):
the policy's weights are loaded into it after every optimizer step through vLLM's own in-place reload
(``VLLMBackend.load_weights``), and its prefix cache is reset. On a GPU the engine takes ``vllm_memory`` of the
GPU's memory and sleeps (level 2: weights and KV cache freed) while the policy trains. A sync that fails leaves
the sampler stale: every later ``sample`` raises ``WeightSyncError`` instead of sampling the old weights.

The learner never uses the sampler's log-probabilities in its loss: the importance ratio's pi_old is the
policy's own (``Learner.update``); the sampler's are only compared with them (``sampler_logp_diff`` metrics).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any, Protocol

# (token ids through the end-of-sequence token, ended before the budget, sampling log-probs or None)
Sample = tuple[list[int], bool, "list[float] | None"]
CPU_RAM_SHARE = 0.5  # sampler=auto on CPU: vLLM's weights + KV cache may take at most this share of free RAM


class WeightSyncError(RuntimeError):
    """The policy's new weights did not reach the vLLM engine: the run stops rather than sample stale weights."""


class Sampler(Protocol):
    name: str
    judge: Any  # a JudgeBackend on the same weights as the sampler (RARO's critic is the policy)

    def sample(self, prompts: Sequence[list[int]], n: int, max_new_tokens: int, temperature: float, top_p: float,
               seed: int) -> list[Sample]: ...

    def sync(self, model: Any) -> None: ...

    def release(self) -> None: ...

    def close(self) -> None: ...


class TransformersSampler:
    """Sampling with the policy's own weights (``TransformersBackend.sample_tokens``); on a GPU from its bf16
    copy (``Placement.sample_dtype``), which ``sync`` refreshes in place."""

    name = "transformers"

    def __init__(self, backend: Any):
        self.judge = backend

    def sample(self, prompts: Sequence[list[int]], n: int, max_new_tokens: int, temperature: float, top_p: float,
               seed: int) -> list[Sample]:
        rows = [p for p in prompts for _ in range(n)]  # C * n rows, prompt-major
        got = self.judge.sample_tokens(rows, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                                       top_k=0, seed=seed)
        return [(toks, ended, None) for toks, ended in got]

    def sync(self, model: Any) -> None:
        self.judge.refresh_sampler()

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass


class VLLMSampler:
    """A vLLM engine in this process on the policy's initial weights, kept in step by ``sync`` (see module doc)."""

    name = "vllm"

    def __init__(self, model: str, dtype: str, device: str, seed: int, memory: float, sleep: bool):
        from rewardkit.backends.vllm_backend import VLLMBackend

        on_gpu = device != "cpu"
        engine: dict[str, Any] = {"generation_config": "vllm", "logprobs_mode": "processed_logprobs"}
        if on_gpu and sleep:
            engine["enable_sleep_mode"] = True
        self.judge = self.backend = VLLMBackend(model, dtype=dtype, seed=seed, in_process=True,
                                                gpu_memory_utilization=memory, **engine)
        self.sleeps = on_gpu and sleep
        self.stale: str | None = None  # why the engine's weights are not the policy's (None: in step)

    def sample(self, prompts: Sequence[list[int]], n: int, max_new_tokens: int, temperature: float, top_p: float,
               seed: int) -> list[Sample]:
        if self.stale:
            raise WeightSyncError(f"vLLM holds stale weights ({self.stale}); refusing to sample from them")
        return self.backend.sample_tokens(prompts, n, max_new_tokens, temperature, top_p, seed)

    def sync(self, model: Any) -> None:
        """Load ``model``'s parameters into the engine (every one, by its Hugging Face name)."""
        params = list(model.named_parameters())
        self.stale = "a weight sync is in progress"
        try:
            taken = self.backend.load_weights((name, p.detach()) for name, p in params)
        except Exception as e:
            self.stale = f"the last sync failed: {type(e).__name__}: {e}"
            raise WeightSyncError(f"loading the policy's weights into vLLM failed: {type(e).__name__}: {e}") from e
        if taken != len(params):
            self.stale = f"the last sync loaded {taken} of {len(params)} tensors"
            raise WeightSyncError(f"vLLM took {taken} of the policy's {len(params)} tensors")
        self.stale = None

    def release(self) -> None:
        """Free the engine's GPU memory while the policy trains (sleep mode); the next ``sync`` wakes it."""
        if self.sleeps and not self.stale:
            self.stale = "asleep while the policy trains"
            self.backend.sleep()

    def close(self) -> None:
        self.backend.close()


def vllm_importable() -> bool:
    """vLLM is installed and imports (the CPU build or a CUDA build)."""
    if importlib.util.find_spec("vllm") is None:
        return False
    try:
        import vllm  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken install (e.g. torchvision built for another torch) is "no vLLM"
        return False
    return True


def choose_sampler(wanted: str, device: str, param_bytes: int, memory: float) -> str:
    """``wanted`` as given, or for ``auto``: vllm when vLLM imports, runs on the trainer's device (its CPU
    build for cpu, a CUDA build for a GPU) and the policy fits its share of memory (on a GPU ``memory`` x
    the card, weights in the engine; on CPU the weights + the 1 GiB KV cache in half the free RAM), else
    transformers."""
    if wanted != "auto":
        return wanted
    if not vllm_importable():
        return "transformers"
    from vllm.platforms import current_platform

    if device == "cpu":
        if not current_platform.is_cpu():
            return "transformers"
        import psutil

        from rewardkit.backends.vllm_backend import CPU_KV_CACHE_BYTES

        return "vllm" if param_bytes + CPU_KV_CACHE_BYTES <= CPU_RAM_SHARE * psutil.virtual_memory().available \
            else "transformers"
    if not current_platform.is_cuda_alike():
        return "transformers"
    import torch

    total = torch.cuda.get_device_properties(torch.device(device)).total_memory
    return "vllm" if param_bytes < memory * total else "transformers"


def make_sampler(kind: str, backend: Any, config: Any) -> Sampler:
    """The sampler ``kind`` for a learner whose policy is ``backend`` (a TransformersBackend) under ``config``."""
    if kind == "transformers":
        return TransformersSampler(backend)
    from rewardkit.backends.embedded import ALIASES

    model = backend.model
    dtype = str(model.dtype).replace("torch.", "")
    path = config.model if config.model in ALIASES else model.name_or_path  # the alias: the dtype's own copy
    return VLLMSampler(path, dtype, str(backend.device), config.seed, config.vllm_memory, config.vllm_sleep)
