"""Defaults that follow the hardware: device, dtype, token budgets and prefix sharing chosen in one place."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rewardkit.backends import hardware
from rewardkit.backends.hardware import (
    CPU_BATCH_TOKENS,
    GPU_MAX_BATCH_TOKENS,
    GPU_MIN_BATCH_TOKENS,
    bytes_per_token,
    place,
    resolve_device,
    resolve_dtype,
)

GiB = 2**30
# the 1.39B Llama of benchmarks/engine_speed.py and SmolLM2-135M's shapes
BIG = SimpleNamespace(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                      num_key_value_heads=2)
SMALL = SimpleNamespace(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                        num_key_value_heads=3)


@pytest.fixture
def gpu(monkeypatch):
    """torch reports a CUDA device with ``free`` bytes of free memory (set on the returned namespace)."""
    import torch

    state = SimpleNamespace(free=100 * GiB)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (state.free, 141 * GiB))
    return state


def test_cpu_keeps_small_passes_and_prefix_sharing():
    p = place(SimpleNamespace(config=BIG), "cpu", "float32")
    assert (p.batch_tokens, p.share_prefix, p.max_rows) == (CPU_BATCH_TOKENS, True, None)
    assert p.generation_tokens == 4 * CPU_BATCH_TOKENS  # rows x (prompt + new) within 4 budgets, as before
    assert "cpu" in p.describe() and "prefix sharing on" in p.describe()


def test_explicit_settings_win_on_every_device(gpu):
    for device in ("cpu", "cuda"):
        p = place(SimpleNamespace(config=BIG), device, "bfloat16", batch_tokens=2048, share_prefix=False, max_rows=7)
        assert (p.batch_tokens, p.share_prefix, p.max_rows) == (2048, False, 7)


def test_gpu_budget_follows_free_memory_and_model_size(gpu):
    model = SimpleNamespace(config=BIG)
    roomy = place(model, "cuda", "bfloat16")
    assert roomy.batch_tokens == GPU_MAX_BATCH_TOKENS and not roomy.share_prefix  # capped; no prefix sharing
    act, kv = bytes_per_token(BIG, "bfloat16")
    assert roomy.batch_tokens * act <= 0.4 * gpu.free  # activations within the memory share
    assert roomy.generation_tokens * kv <= 0.4 * gpu.free and roomy.generation_tokens > 10 * roomy.batch_tokens
    # a decode batch is not split to the scoring budget by its prefill: 512 rows x 400-token prompts fit
    assert roomy.generation_prefill_tokens * act <= 0.4 * gpu.free and roomy.generation_prefill_tokens >= 512 * 400
    gpu.free = 2 * GiB  # a busy card: smaller passes, never below the floor
    tight = place(model, "cuda", "bfloat16")
    assert GPU_MIN_BATCH_TOKENS <= tight.batch_tokens < roomy.batch_tokens
    assert tight.generation_tokens < roomy.generation_tokens
    assert "GiB free" in tight.describe()


def test_a_bigger_model_gets_a_smaller_budget_in_the_same_memory(gpu):
    gpu.free = 4 * GiB
    small, big = (place(SimpleNamespace(config=c), "cuda", "bfloat16") for c in (SMALL, BIG))
    assert small.batch_tokens > big.batch_tokens
    assert small.generation_tokens > big.generation_tokens  # 23 KB vs 29 KB of KV cache per token
    assert bytes_per_token(BIG, "float32")[0] == 2 * bytes_per_token(BIG, "bfloat16")[0]


def test_the_engine_choices_follow_the_device_and_injected_decisions_win(gpu):
    model = SimpleNamespace(config=BIG)
    cpu = place(model, "cpu", "float32", sample_dtype="auto")
    assert (cpu.static_cache, cpu.overlap, cpu.sample_dtype) == (False, False, None)  # the CPU path as before
    assert [cpu.decode_rows(n) for n in (1, 3, 9)] == [1, 3, 9] and cpu.decode_width(94) == 94
    cuda = place(model, "cuda", "float32", sample_dtype="auto")
    assert (cuda.static_cache, cuda.overlap, cuda.sample_dtype) == (True, True, "bfloat16")
    assert "static KV cache" in cuda.describe()
    # a compiled decode step per power of two of rows from 8, up to the row cap: 8 shapes for 1..1,024 rows
    assert [cuda.decode_rows(n) for n in (1, 8, 9, 64, 65, 512, 1000)] == [8, 8, 16, 64, 128, 512, 1024]
    assert len({cuda.decode_rows(n) for n in range(1, 1025)}) == 8
    assert [cuda.decode_width(w) for w in (1, 64, 65, 94)] == [64, 64, 128, 128]
    assert place(model, "cuda", "bfloat16", sample_dtype="auto").sample_dtype is None  # already bf16: no copy
    assert place(model, "cuda", "float32", max_rows=100).decode_rows(65) == 100  # never past the row cap
    # decisions injected: the GPU choices on a CPU (how the tests exercise them here), and off on a GPU
    forced = place(model, "cpu", "float32", static_cache=True, overlap=True, sample_dtype="bfloat16")
    assert (forced.static_cache, forced.overlap, forced.sample_dtype) == (True, True, "bfloat16")
    assert forced.decode_rows(3) == 8 and forced.decode_width(94) == 128
    off = place(model, "cuda", "float32", static_cache=False, overlap=False)
    assert (off.static_cache, off.overlap, off.decode_rows(3), off.decode_width(94)) == (False, False, 3, 94)


def test_auto_device_and_dtype_follow_what_torch_sees(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu"
    with pytest.raises(ValueError, match="no CUDA device"):
        resolve_device("cuda:0")
    monkeypatch.setattr(hardware, "cpu_supports_bf16", lambda: True)
    assert resolve_dtype("auto", "cpu") == "bfloat16"
    assert resolve_dtype("auto", "cpu", training=True) == "float32"  # a trained policy stays fp32 on a CPU
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert resolve_device("auto") == "cuda"
    assert resolve_dtype("auto", "cuda") == "bfloat16"
    assert resolve_dtype("auto", "cuda", training=True) == "float32"  # pure-bf16 AdamW would round updates away
    assert resolve_dtype("float16", "cuda") == "float16"


@pytest.mark.model
def test_rewardkit_score_says_once_what_the_defaults_chose(tmp_path):
    """`rewardkit score` with a local judge prints one line naming device, dtype, budgets and prefix sharing."""
    import json

    import torch
    from typer.testing import CliRunner

    if torch.cuda.is_available():
        pytest.skip("the line checked is the CPU's placement")

    from rewardkit.cli.app import app

    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"id": "g", "problem": "What is 2+3?", "answer": "5",
                                "responses": ["2+3 = \\boxed{5}", "\\boxed{6}"]}) + "\n")
    res = CliRunner().invoke(app, ["score", str(rows), "--scorer", "pointwise", "--judge", "smollm2", "--dtype",
                                   "float32", "-o", "mode=logit", "--out", str(tmp_path / "out.jsonl")])
    assert res.exit_code == 0, res.output
    said = [line for line in res.stderr.splitlines() if line.startswith("judge: ")]
    assert said == ["judge: smollm2-135m-instruct@float32: cpu, float32, 4,096 tokens per scoring pass, 16,384 "
                    "tokens (rows x (prompt + new)) per generation batch, prefix sharing on"]
