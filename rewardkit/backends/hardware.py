"""Defaults that follow the hardware: one place decides where a local model runs and how big its batches are.

A local judge or policy runs on the GPU when torch sees one, else on the CPU (``device="auto"``), in bfloat16
where the hardware has it (``dtype="auto"``; weights being trained stay float32). Its token budget per
forward pass comes from the model's size and the device's free memory on a GPU, and stays at 4,096 tokens on a
CPU, where a few large passes do not pay; prefix sharing (one KV cache for a prefix several verdict prompts
share) is on only on the CPU, where it was measured to win (2.4x) -- on a GPU its extra passes and cache copies
cost more than re-reading the prefix in one big batch (benchmarks/results/engine_speed_h200_run1.md). On a GPU the engine
also decodes with transformers' static KV cache and compiled decode step (the compile is paid once per model and
shape, so batches are padded to a few row counts and widths), prepares the next verdict batch while the GPU runs
this one, and samples a float32 policy from a bfloat16 copy. The transformers backend, ``rewardkit train``'s
policy, ``serve-judge`` and the trainer's rollouts all take their settings from ``place``; ``Placement.describe``
is the line ``rewardkit score`` prints.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

CPU_BATCH_TOKENS = 4096  # rows x padded width per forward pass on a CPU (benchmarks/results/judge_memory.md)
CPU_GENERATION_FACTOR = 4  # on a CPU generation packs rows x (prompt + new tokens) <= 4 forward budgets
GPU_MAX_BATCH_TOKENS = 65_536  # measured on an H200: 262,144 ran 0.6x and 131,072 0.96x of this (1.39B model)
GPU_MIN_BATCH_TOKENS = 8_192
GPU_MAX_GENERATION_ROWS = 1_024  # rows decoded together; past this a decode step is compute-bound anyway
GPU_MIN_ROW_BUCKET = 8  # a compiled decode step per power of two from 8 rows: at most 8 shapes up to 1,024 rows
# prompts left-padded to a multiple of a step that grows with their width (the static cache's length follows): an
# eighth of the width's power of two, from 8 to 64 tokens (Placement.decode_width). A flat 64 padded 409 tokens to
# 448 and ran 0.992x model.generate twice on an H200 (512 sampled rows of 42-409 tokens); 416, the width this rule
# gives, ran 1.009x and 1.006x, alternated in one lease (benchmarks/results/engine_speed_width.md). Never coarser
# than the flat 64 before: 8 widths per doubling below 512 tokens, 64-token steps from there up
GPU_WIDTH_BUCKET = 64  # the coarsest step
GPU_MIN_WIDTH_STEP = 8


@cache
def cpu_supports_bf16() -> bool:
    """True when the CPU has native bf16 arithmetic (AVX512-BF16 or AMX-BF16), where bf16 pays on CPU."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        flags = ""
    if "avx512_bf16" in flags or "amx_bf16" in flags:
        return True
    import torch

    return "AMX" in torch.backends.cpu.get_cpu_capability()


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU, else ``cpu``; a named device must exist (ValueError)."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but torch sees no CUDA device (torch {torch.__version__}); "
                         "use device=cpu or device=auto")
    return device


def resolve_dtype(dtype: str, device: str, *, training: bool = False) -> str:
    """``auto`` -> bfloat16 on a GPU (float16 where it lacks bf16) and on a bf16-capable CPU, else float32.
    Weights being trained (``training``) stay float32 on every device: AdamW on pure bf16 weights rounds away
    updates below bf16's resolution (about 0.4% of a weight), i.e. most steps at the papers' 1e-6..1e-5
    learning rates. Other names pass through."""
    if dtype != "auto":
        return dtype
    if training:
        return "float32"
    import torch

    if device.startswith("cuda"):
        return "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
    return "bfloat16" if cpu_supports_bf16() else "float32"


def default_threads() -> int:
    """Torch CPU threads for a judge: the cores this process may use that are not already busy.

    On a shared machine OpenMP threads spin-wait for cores other processes hold, so a thread per core ran
    about half as fast per call as one thread on the 2-core development box (benchmarks/results/
    judge_memory.md); on an idle machine this is every core the process may use.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    try:
        busy = os.getloadavg()[0]
    except OSError:
        busy = 0.0
    return max(1, min(cores, int(cores - busy + 0.5)))


def resolve_threads(num_threads: int | None) -> int:
    """``num_threads``, else ``$REWARDKIT_TORCH_THREADS``, else ``$OMP_NUM_THREADS``, else ``default_threads()``."""
    for value, where in ((num_threads, "num_threads"), (os.environ.get("REWARDKIT_TORCH_THREADS"), "REWARDKIT_TORCH_THREADS"),
                         (os.environ.get("OMP_NUM_THREADS"), "OMP_NUM_THREADS")):
        if value in (None, "", 0):
            continue
        try:
            n = int(value)
        except ValueError:
            raise ValueError(f"{where}={value!r}: expected a positive number of threads") from None
        if n < 1:
            raise ValueError(f"{where}={value!r}: expected a positive number of threads")
        return n
    return default_threads()


@dataclass(frozen=True)
class Placement:
    """Where a loaded model runs and how its work is packed (what ``place`` chose, and why it is safe)."""

    device: str
    dtype: str
    batch_tokens: int  # rows x padded width of one scoring forward pass
    generation_tokens: int  # rows x (prompt + new tokens) decoded together (the KV cache they hold)
    generation_prefill_tokens: int  # rows x prompt width of one generation batch's prefill pass
    share_prefix: bool
    max_rows: int | None = None  # cap on rows per pass (None: the token budgets alone decide)
    free_bytes: int | None = None  # the device's free memory when placed (GPU)
    static_cache: bool = False  # decode with transformers' static KV cache (compiled decode step on CUDA)
    row_bucket: int = 1  # decode batches padded to a power of two of rows from this (1: no padding)
    width_bucket: int = 1  # the coarsest step decode prompts are left-padded to (decode_width; 1: no padding)
    overlap: bool = False  # prepare the next verdict chunk while the device runs this one; no host sync in a batch
    sample_dtype: str | None = None  # a float32 model being trained samples from a copy in this dtype (None: itself)

    def describe(self) -> str:
        """One line for people: ``cuda, bfloat16, 131,072 tokens per pass, ...``."""
        free = f", {self.free_bytes / 2**30:.1f} GiB free at load" if self.free_bytes is not None else ""
        widths = (f"prompts to multiples of {self.width_bucket} tokens" if self.width_bucket <= GPU_MIN_WIDTH_STEP
                  else f"prompts to multiples of {GPU_MIN_WIDTH_STEP}-{self.width_bucket} tokens, an eighth of their width")
        static = (f", static KV cache (rows padded to powers of two from {self.row_bucket}, {widths})"
                  if self.static_cache else "")
        return (f"{self.device}, {self.dtype}, {self.batch_tokens:,} tokens per scoring pass, "
                f"{self.generation_tokens:,} tokens (rows x (prompt + new)) per generation batch, "
                f"prefix sharing {'on' if self.share_prefix else 'off'}{static}{free}")

    def decode_rows(self, n: int) -> int:
        """Rows a decode batch of ``n`` rows is padded to: the next power of two from ``row_bucket`` (at most
        ``max_rows`` when that is smaller), so a compiled decode step sees a few batch shapes, not every count."""
        if self.row_bucket <= 1 or n <= 0:
            return n
        rows = self.row_bucket
        while rows < n:
            rows *= 2
        return max(n, min(rows, self.max_rows or rows))

    def decode_width(self, width: int) -> int:
        """Prompt width a decode batch is left-padded to: the next multiple of an eighth of the width's power of
        two, at least 8 and at most ``width_bucket`` tokens (... 56, 64, 72, ... 128, 144, ... 384, 416, ...: under 8
        tokens of padding below 64, at most an eighth of the width above, 8 widths per doubling, so a compiled decode
        step sees few shapes); ``width_bucket`` 8 or less: its plain multiples (1: no padding)."""
        step = min(self.width_bucket, max(GPU_MIN_WIDTH_STEP, 1 << max(0, width.bit_length() - 4)))
        return -(-width // step) * step

    def _decode_fits(self, rows: int, width: int, new: int) -> bool:
        """``rows`` rows of ``width`` padded prompt tokens fit the KV-cache and the prefill budgets."""
        return rows * (width + new) <= self.generation_tokens and rows * width <= self.generation_prefill_tokens

    def decode_shape(self, n: int, width: int, new: int) -> tuple[int, int]:
        """(rows, prompt width) a decode batch of ``n`` rows, widest prompt ``width`` tokens, runs as: its row
        bucket when that fits the budgets, else its own row count (a batch below the smallest bucket that fits)."""
        w = self.decode_width(width)
        rows = self.decode_rows(n)
        return (rows if self._decode_fits(rows, w, new) else n), w

    def decode_batches(self, order: list[int], length, new: int) -> list[list[int]]:
        """Consecutive runs of ``order`` (sorted by prompt length, ``length(i)`` tokens) decoded together.

        A batch grows while its padded shape (``decode_shape``) fits the KV-cache and prefill budgets and the row
        cap, never past a row bucket into a count with no bucket that fits, and a batch that stops between
        buckets gives the rows past the last full bucket to the next batch: a split batch decodes as a full
        bucket (no padding rows, no odd row count that would compile the decode step afresh), only the last one
        is padded. A row over the budgets goes alone. Without buckets (a CPU): rows x (prompt + new) within
        ``generation_tokens`` and rows x prompt within ``generation_prefill_tokens``, unpadded."""
        out: list[list[int]] = []
        start = 0
        while start < len(order):
            k, widest = 1, int(length(order[start]))
            while start + k < len(order) and (self.max_rows is None or k < self.max_rows):
                w = max(widest, int(length(order[start + k])))
                rows, width = self.decode_shape(k + 1, w, new)
                on_bucket = self.decode_shape(k, widest, new)[0] == self.decode_rows(k)
                if not self._decode_fits(rows, width, new) or (on_bucket and rows != self.decode_rows(k + 1)):
                    break
                k, widest = k + 1, w
            full = self.row_bucket
            while full * 2 <= k:
                full *= 2
            if start + k < len(order) and self.row_bucket > 1 and full < k:
                k = full  # the rows past the full bucket start the next batch
            out.append(order[start:start + k])
            start += k
        return out


def _attr(config: Any, name: str, default: int) -> int:
    """A decoder config's ``name`` as an int; ``default`` where the config lacks it or leaves it 0 or None."""
    return int(getattr(config, name, None) or default)


def _sizes(config: Any, dtype: str) -> tuple[int, int, int, int]:
    """(bytes per value, hidden size, intermediate size, layers) of a decoder config, with Llama-1B-like defaults
    for what it does not say: 2,048 wide, an MLP 4 times that, 24 layers."""
    hidden = _attr(config, "hidden_size", 2048)
    return (4 if dtype == "float32" else 2, hidden, _attr(config, "intermediate_size", 4 * hidden),
            _attr(config, "num_hidden_layers", 24))


def bytes_per_token(config: Any, dtype: str) -> tuple[int, int]:
    """(activation bytes of one token in a forward pass, KV-cache bytes of one token) for a decoder config.

    Activations: the widest moment of a layer holds the residual stream, the attention projections and the
    MLP's gate, up and activated tensors (about 6 hidden + 3 intermediate values); inference frees each
    layer's tensors before the next. KV cache: keys and values of every layer (16 heads where the config does
    not say, as many key-value heads as heads, heads of hidden / heads values).
    """
    size, hidden, inter, layers = _sizes(config, dtype)
    heads = _attr(config, "num_attention_heads", 16)
    kv_heads = _attr(config, "num_key_value_heads", heads)
    head_dim = _attr(config, "head_dim", hidden // heads)
    return size * (6 * hidden + 3 * inter), size * 2 * layers * kv_heads * head_dim


def train_bytes_per_token(config: Any, dtype: str) -> int:
    """Bytes one token holds for the backward pass of a training forward: every layer's saved activations (about
    10 hidden + 4 intermediate values: norms, projections, attention output, the MLP's gate, up and products),
    kept for all layers at once, plus the completion log-probabilities' float32 logits, scaled logits,
    log-softmax and its exp (4 vocabulary-wide values; a 32,000-token vocabulary where the config does not say)."""
    size, hidden, inter, layers = _sizes(config, dtype)
    vocab = _attr(config, "vocab_size", 32_000)
    return layers * size * (10 * hidden + 4 * inter) + 4 * 4 * vocab


def train_token_budget(config: Any, dtype: str, free_bytes: int, fraction: float = 0.5) -> int:
    """Tokens (rows x padded width) one forward and backward pass of an update may hold: ``fraction`` of
    ``free_bytes`` (the memory left once weights, gradients and optimizer state are counted) over
    ``train_bytes_per_token``; at least one row's worth is always tried (``token_batches`` sends a wider row alone)."""
    return max(1, int(fraction * free_bytes) // train_bytes_per_token(config, dtype))  # none free: 1


def place(model: Any, device: str, dtype: str, *, batch_tokens: int | None = None, share_prefix: bool | None = None,
          max_rows: int | None = None, memory_fraction: float = 0.4, static_cache: bool | None = None,
          overlap: bool | None = None, sample_dtype: str | None = None) -> Placement:
    """The batching of a model loaded on ``device``: explicit settings win; otherwise a CPU keeps 4,096-token
    passes, prefix sharing and the dynamic KV cache, and a GPU sizes passes so activations (scoring) or KV
    caches (generation) take at most ``memory_fraction`` of its free memory, without prefix sharing, with the
    static KV cache and compiled decode step (rows and widths bucketed), verdict chunks prepared ahead, and a
    bfloat16 sampling copy of a float32 model. ``sample_dtype="auto"`` asks for that copy where it pays."""
    if not device.startswith("cuda"):
        budget = batch_tokens or CPU_BATCH_TOKENS
        gen = CPU_GENERATION_FACTOR * budget
        static = bool(static_cache)
        return Placement(device, dtype, budget, gen, gen, True if share_prefix is None else share_prefix, max_rows,
                         static_cache=static, row_bucket=GPU_MIN_ROW_BUCKET if static else 1,
                         width_bucket=GPU_WIDTH_BUCKET if static else 1, overlap=bool(overlap),
                         sample_dtype=None if sample_dtype in (None, "auto") else sample_dtype)
    import torch

    free, _ = torch.cuda.mem_get_info(torch.device(device))
    if sample_dtype == "auto":  # float32 weights that train sample from a bf16 copy (decode reads half the bytes)
        sample_dtype = "bfloat16" if dtype == "float32" and torch.cuda.is_bf16_supported() else None
    act, _ = bytes_per_token(model.config, dtype)
    gen_act, kv = bytes_per_token(model.config, sample_dtype or dtype)  # what decodes: the copy's KV cache
    usable = memory_fraction * free
    auto = int(min(GPU_MAX_BATCH_TOKENS, max(GPU_MIN_BATCH_TOKENS, usable // act)))
    budget = batch_tokens or auto
    gen = int(max(budget, usable // kv))
    # a generation batch's prefill runs once before hundreds of decode steps: it may fill the memory share
    # (splitting it to the scoring budget split the decode batch too: 1.2x instead of 3x model.generate)
    prefill = int(max(budget, usable // gen_act))
    rows = max_rows if max_rows is not None else GPU_MAX_GENERATION_ROWS
    static = True if static_cache is None else static_cache
    return Placement(device, dtype, budget, gen, prefill, False if share_prefix is None else share_prefix, rows, free,
                     static_cache=static, row_bucket=GPU_MIN_ROW_BUCKET if static else 1,
                     width_bucket=GPU_WIDTH_BUCKET if static else 1, overlap=True if overlap is None else overlap,
                     sample_dtype=sample_dtype)
