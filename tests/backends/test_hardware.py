"""Defaults that follow the hardware: device, dtype, token budgets and prefix sharing chosen in one place."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rewardkit.backends import hardware
from rewardkit.backends.hardware import (
    CPU_BATCH_TOKENS,
    GPU_MAX_BATCH_TOKENS,
    GPU_MIN_BATCH_TOKENS,
    GPU_WIDTH_BUCKET,
    Placement,
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
    # a step of an eighth of the width's power of two, 8 to 64 tokens: 409 -> 416 (ran 1.006-1.009x model.generate
    # on an H200 where a flat 64, 448, ran 0.992x), 8 widths per doubling, 64-token steps from 512 up as before
    assert [cuda.decode_width(w) for w in (1, 8, 9, 63, 64, 65, 94, 128, 129, 409, 513, 1102)] == \
        [8, 8, 16, 64, 64, 72, 96, 128, 144, 416, 576, 1152]
    assert len({cuda.decode_width(w) for w in range(1, 513)}) == 32 and "an eighth of their width" in cuda.describe()
    assert place(model, "cuda", "bfloat16", sample_dtype="auto").sample_dtype is None  # already bf16: no copy
    assert place(model, "cuda", "float32", max_rows=100).decode_rows(65) == 100  # never past the row cap
    # decisions injected: the GPU choices on a CPU (how the tests exercise them here), and off on a GPU
    forced = place(model, "cpu", "float32", static_cache=True, overlap=True, sample_dtype="bfloat16")
    assert (forced.static_cache, forced.overlap, forced.sample_dtype) == (True, True, "bfloat16")
    assert forced.decode_rows(3) == 8 and forced.decode_width(94) == 96
    off = place(model, "cuda", "float32", static_cache=False, overlap=False)
    assert (off.static_cache, off.overlap, off.decode_rows(3), off.decode_width(94)) == (False, False, 3, 94)


def test_a_float32_policy_sizes_its_decode_batches_for_the_bf16_copy_that_decodes(gpu):
    # the KV cache is the sampling copy's (bf16): budgets from the float32 weights halved the rows per batch
    model = SimpleNamespace(config=BIG)
    copy = place(model, "cuda", "float32", sample_dtype="auto")
    bf16 = place(model, "cuda", "bfloat16")
    fp32 = place(model, "cuda", "float32")
    assert copy.sample_dtype == "bfloat16"
    assert (copy.generation_tokens, copy.generation_prefill_tokens) == (bf16.generation_tokens,
                                                                         bf16.generation_prefill_tokens)
    assert copy.generation_tokens >= 1.9 * fp32.generation_tokens
    assert copy.batch_tokens == fp32.batch_tokens  # scoring passes run the float32 weights


def grpo_rows() -> list[int]:
    """Prompt lengths of GRPO rollouts: 64 MATH-like prompts of 60..319 tokens, 8 samples each (512 rows)."""
    return sorted(60 + (37 * k) % 260 for k in range(64) for _ in range(8))


def cuda_placement(generation_tokens: int, prefill: int | None = None, **kw) -> Placement:
    """A GPU's decode choices (rows bucketed to powers of two from 8, widths by the default steps) with a budget."""
    return Placement("cuda", "bfloat16", 65_536, generation_tokens, prefill or generation_tokens, False,
                     kw.pop("max_rows", 1024), static_cache=True, row_bucket=8, width_bucket=GPU_WIDTH_BUCKET, **kw)


def test_a_split_decode_batch_lands_on_row_buckets_that_fit():
    lengths = grpo_rows()
    order = list(range(len(lengths)))
    # 512 rows x (320 + 256) padded do not fit 200,000 tokens; 300-odd rows do unpadded. Packing on unpadded
    # lengths made a batch of ~450 rows: padded to 512 it overflowed, so it ran as 450 rows (a shape with no
    # compiled step) -- or, had it fit, decoded 60 padding rows
    pl = cuda_placement(200_000)
    batches = pl.decode_batches(order, lengths.__getitem__, 256)
    assert [i for b in batches for i in b] == order  # every row once, in order
    shapes = [pl.decode_shape(len(b), max(lengths[i] for i in b), 256) for b in batches]
    assert [rows for rows, _ in shapes] == [256, 256]  # full buckets, no padding rows
    assert all(rows * (w + 256) <= 200_000 for rows, w in shapes)
    # the rows of every batch are a row bucket at any budget, and the padded shape fits it
    for budget in (60_000, 100_000, 150_000, 400_000):
        pl = cuda_placement(budget, prefill=budget // 3)
        batches = pl.decode_batches(order, lengths.__getitem__, 256)
        assert [i for b in batches for i in b] == order
        for b in batches:
            rows, w = pl.decode_shape(len(b), max(lengths[i] for i in b), 256)
            assert rows == pl.decode_rows(len(b)) and rows & (rows - 1) == 0  # a power of two
            assert rows * (w + 256) <= budget and rows * w <= budget // 3
        assert sum(pl.decode_shape(len(b), max(lengths[i] for i in b), 256)[0] for b in batches[:-1]) == \
            sum(len(b) for b in batches[:-1])  # only the last batch carries padding rows


def test_decode_batches_below_the_smallest_bucket_and_without_buckets():
    # 5 rows of 64 + 8 tokens fit, 8 do not: 5-row batches (no bucket fits), not one row at a time
    pl = cuda_placement(5 * 72)
    assert [len(b) for b in pl.decode_batches(list(range(12)), lambda i: 60, 8)] == [5, 5, 2]
    assert pl.decode_shape(5, 60, 8) == (5, 64) and pl.decode_shape(2, 60, 8) == (2, 64)
    # a row over the budgets goes alone; the row cap holds
    assert pl.decode_batches([0, 1], lambda i: 1000, 8) == [[0], [1]]
    assert [len(b) for b in cuda_placement(10**6, max_rows=16).decode_batches(list(range(40)), lambda i: 40, 8)] \
        == [16, 16, 8]
    # no buckets (the CPU): rows x (prompt + new) within the budget, unpadded, as token_batches packs them
    from rewardkit.backends.transformers_backend import token_batches

    cpu = place(SimpleNamespace(config=BIG), "cpu", "float32")
    lengths = grpo_rows()
    order = list(range(len(lengths)))
    assert cpu.decode_batches(order, lengths.__getitem__, 256) == token_batches(
        order, lambda i: lengths[i] + 256, cpu.generation_tokens)


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



def _saved_bytes(layers: int, rows: int = 4, prompt: int = 50, completion: int = 100) -> int:
    """Bytes of the tensors autograd saves for the backward of ``completion_logprobs`` on a random Llama
    (256 wide, 688 intermediate, 4,000-token vocabulary), weights excluded: what a training pass holds."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from rewardkit.grpo.trainer import completion_logprobs

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=4000, hidden_size=256, intermediate_size=688, num_hidden_layers=layers,
                                         num_attention_heads=8, num_key_value_heads=8))
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t):
        saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        completion_logprobs(model, [([1] * prompt, [2] * completion)] * rows, pad_id=0)
    return sum(n for ptr, n in saved.items() if ptr not in weights)


def test_the_training_budget_counts_what_autograd_keeps_for_the_backward():
    # A 1.39B policy's one-pass GRPO update ran out of an H200's memory (engine_speed.md): inference frees each
    # layer, training keeps them all. The estimate is checked against what autograd really saves, measured with
    # saved_tensors_hooks on a real transformers Llama: per layer and token (the slope from 1 to 3 layers)
    # within 5%, and the vocabulary-wide part (logits, log-softmax) never under-counted.
    from types import SimpleNamespace

    from rewardkit.backends.hardware import train_bytes_per_token, train_token_budget

    cfg = SimpleNamespace(hidden_size=256, intermediate_size=688, num_hidden_layers=1, vocab_size=4000)
    one, three = _saved_bytes(1), _saved_bytes(3)
    per_layer = (three - one) / 2 / (4 * 150)  # 4 rows x (50 + 100) tokens
    estimate_layer = train_bytes_per_token(SimpleNamespace(**{**vars(cfg), "num_hidden_layers": 2}), "float32") \
        - train_bytes_per_token(cfg, "float32")
    assert per_layer == pytest.approx(estimate_layer, rel=0.05)
    vocab_part = (one - per_layer * 4 * 150) / (4 * 101)  # per completion column (T + 1 logits kept)
    assert 0 < vocab_part <= train_bytes_per_token(cfg, "float32") - estimate_layer
    assert train_bytes_per_token(cfg, "bfloat16") < train_bytes_per_token(cfg, "float32")
    assert train_token_budget(cfg, "float32", 2**30) > train_token_budget(cfg, "float32", 2**29) > 0
    assert train_token_budget(cfg, "float32", -5) == 1  # nothing free: one row at a time, never 0 or less
