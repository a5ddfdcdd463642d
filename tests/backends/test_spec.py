"""The judge spec grammar: ``TARGET?option=value&...`` typed from each backend's constructor."""

from __future__ import annotations

import pytest

from rewardkit.backends import load_backend, parse_spec
from rewardkit.backends.http import HTTPBackend
from rewardkit.backends.spec import split_spec


def test_http_timeouts_retries_and_deadline_from_the_spec():
    kind, kw = parse_spec("http://127.0.0.1:8000/v1?model=judge&timeout=30&retries=3&deadline=600&concurrency=4")
    assert kind == "http"
    assert kw == {"base_url": "http://127.0.0.1:8000/v1", "model": "judge", "timeout": 30.0, "retries": 3,
                  "deadline": 600.0, "concurrency": 4}
    assert type(kw["retries"]) is int and type(kw["timeout"]) is float
    assert parse_spec("http://h:1/v1?deadline=none")[1]["deadline"] is None
    assert parse_spec("http://h:1/v1?model=a%26b")[1]["model"] == "a&b"  # percent-decoded
    # the model-first form takes the same options
    assert parse_spec("openai:gpt-4o-mini@https://api.example.com/v1?timeout=5") == (
        "http", {"base_url": "https://api.example.com/v1", "model": "gpt-4o-mini", "timeout": 5.0})


def test_local_backends_take_options_through_the_same_grammar():
    assert parse_spec("smollm2?dtype=bfloat16&batch_size=4&share_prefix=false") == (
        "transformers", {"model": "smollm2", "dtype": "bfloat16", "batch_size": 4, "share_prefix": False})
    assert parse_spec("hf:Org/Name?num_threads=none") == ("transformers", {"model": "Org/Name", "num_threads": None})
    assert parse_spec("llamacpp:smollm2?n_ctx=4096") == ("llamacpp", {"model": "smollm2", "n_ctx": 4096})
    # vLLM forwards extra engine arguments: their values are read as literals
    assert parse_spec("vllm:Org/M?tensor_parallel_size=2&swap_space=1.5&enforce_eager=true") == (
        "vllm", {"model": "Org/M", "tensor_parallel_size": 2, "swap_space": 1.5, "enforce_eager": True})


@pytest.mark.parametrize("spec,message", [
    ("http://h:1/v1?retries=abc", "option 'retries': must be an integer"),
    ("http://h:1/v1?retries=1.5", "option 'retries': must be an integer"),
    ("http://h:1/v1?timeout=nan", "option 'timeout': must be a finite number"),
    ("http://h:1/v1?timeout=inf", "finite"),
    ("http://h:1/v1?tiemout=3", "unknown option 'tiemout' for HTTPBackend (options: "),
    ("http://h:1/v1?timeout=3&timeout=4", "given twice"),
    ("http://h:1/v1?timeout", "expected 'option=value'"),
    ("http://h:1/v1?timeout=", "expected 'option=value'"),
    ("http://h:1/v1?api_key=sk-123", "must not carry 'api_key'"),
    ("http://h:1/v1#model=m", "a spec has no '#' part; name the model with '?model=NAME'"),  # legacy spelling, gone
    ("http://h:1/v1?timeout=0", "option 'timeout': must be > 0"),  # the backend's option checks, no model load
    ("smollm2?dtype=fp8", "option 'dtype': must be one of auto, float32, bfloat16, float16, got 'fp8'"),
    ("smollm2?batch_size=four", "option 'batch_size': must be an integer"),
    ("smollm2?share_prefix=maybe", "option 'share_prefix': must be true or false"),
    ("smollm2?model=other", "'model=' is for URLs"),
    ("smollm2?n_ctx=4096", "unknown option 'n_ctx' for TransformersBackend"),
])
def test_bad_options_name_the_option(spec, message):
    with pytest.raises(ValueError, match="spec") as e:
        parse_spec(spec)
    assert message in str(e.value)


def test_options_reach_the_backend_and_are_validated():
    b = load_backend("http://127.0.0.1:9/v1?model=j&timeout=7&retries=0&deadline=20")
    assert isinstance(b, HTTPBackend) and (b.model, b.timeout, b.retries, b.deadline) == ("j", 7.0, 0, 20.0)
    for bad in ("timeout=0", "timeout=-1", "retries=-1", "concurrency=0", "deadline=0", "top_logprobs=21"):
        with pytest.raises(ValueError, match=f"option '{bad.split('=')[0]}'"):
            load_backend(f"http://127.0.0.1:9/v1?model=j&{bad}")
    with pytest.raises(ValueError, match="retries=0 but retries=2"):
        load_backend("http://127.0.0.1:9/v1?model=j&retries=0", retries=2)


def test_split_spec_keeps_paths_and_names():
    assert split_spec("/models/judge") == ("transformers", "/models/judge", {})
    assert split_spec("openai:a@b@https://h/v1") == ("http", "https://h/v1", {"model": "a@b"})
