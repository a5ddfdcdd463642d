"""A tiny random causal LM with the embedded model's tokenizer: the trainer's mechanics (batches, losses,
checkpoints, resume, modes) at a few milliseconds a step. Tests of what the embedded model does keep
``judge_backend`` / ``model="smollm2"``."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> str:
    """A folder holding a 2-layer, 32-wide Llama with SmolLM2's tokenizer and chat template (random weights)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from rewardkit.backends.embedded import embedded_model_path

    out: Path = tmp_path_factory.mktemp("tiny-llama")
    tok = AutoTokenizer.from_pretrained(embedded_model_path("float32"))
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                      tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id)
    LlamaForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return str(out)
