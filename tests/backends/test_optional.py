"""Optional backends: vLLM and llama.cpp; imported only when chosen, with clear messages otherwise (vLLM itself
runs in tests/backends/test_vllm.py, in the environment scripts/vllm_cpu_env.sh builds)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rewardkit.backends import ChatRequest, VerdictRequest, load_backend
from rewardkit.types import Status

ROOT = Path(__file__).resolve().parents[2]
HAS_VLLM = importlib.util.find_spec("vllm") is not None
HAS_LLAMACPP = importlib.util.find_spec("llama_cpp") is not None
needs_llamacpp = pytest.mark.skipif(
    not HAS_LLAMACPP, reason="llama-cpp-python is not installed (optional extra rewardkit[llamacpp]; it "
                             "compiles llama.cpp from source: scripts/llamacpp_env.sh builds it and runs these in CI)")


def test_backend_modules_do_not_import_engines():
    code = ("import sys; import rewardkit.backends, rewardkit.backends.vllm_backend, "
            "rewardkit.backends.llamacpp_backend; print('vllm' in sys.modules, 'llama_cpp' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert out.stdout.split() == ["False", "False"], out.stderr[-1000:]


@pytest.mark.skipif(HAS_VLLM, reason="vllm is installed: the missing-package message cannot be shown")
def test_vllm_missing_is_a_clear_message():
    with pytest.raises(ImportError, match=r"rewardkit\[vllm\].*CUDA GPU.*vllm_cpu_env\.sh"):
        load_backend("vllm:some/model")


@pytest.mark.skipif(HAS_LLAMACPP, reason="llama-cpp-python is installed")
def test_llamacpp_missing_is_a_clear_message():
    with pytest.raises(ImportError, match=r"rewardkit\[llamacpp\]"):
        load_backend("llamacpp:smollm2")


@needs_llamacpp
@pytest.mark.model
def test_llamacpp_agrees_with_transformers(judge_backend):
    b = load_backend("llamacpp:smollm2", n_ctx=2048)
    req = [VerdictRequest([{"role": "user", "content": "Is 7 prime? Answer YES or NO."}], ["YES", "NO"], "**")]
    [v], [t] = b.verdict_probs(req), judge_backend.verdict_probs(req)
    assert v.status is Status.OK
    # same tokens and Q4_1 weights; llama.cpp quantises activations to 8 bits in its Q4_1 dot products
    # (measured here: 0.074 apart on this prompt), so the probabilities agree only to about 0.1
    assert v.best() == t.best()
    np.testing.assert_allclose(v.probs, t.probs, atol=0.1)
    with pytest.raises(ValueError, match="verdict request 1: every choice must be a non-empty string"):
        b.verdict_probs(req + [VerdictRequest(req[0].messages, ["YES", ""], "**")])  # was an IndexError
    [c] = b.generate([ChatRequest([{"role": "user", "content": "Say hi."}], max_tokens=8)])
    assert c.status is Status.OK and 0 < c.completion_tokens <= 8
    # min_tokens holds back end-of-sequence: SmolLM2 ends "Say hi." well before 48 tokens on its own
    free, forced = b.generate([ChatRequest([{"role": "user", "content": "Say hi."}], max_tokens=48),
                               ChatRequest([{"role": "user", "content": "Say hi."}], max_tokens=48, min_tokens=48)])
    assert free.completion_tokens < 48 and forced.completion_tokens == 48


@needs_llamacpp
def test_llamacpp_server_as_a_third_party_http_judge():
    """`python -m llama_cpp.server` is a real OpenAI-compatible server for the HTTP backend."""
    from rewardkit.backends.embedded import GGUF_FILE, gguf_dir
    from rewardkit.backends.http import HTTPBackend
    from rewardkit.testing import listening_ports

    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_dir() / GGUF_FILE),
                             "--host", "127.0.0.1", "--port", "0", "--n_ctx", "2048"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300  # port 0: the port it got is read from its socket once it listens
        while not (ports := listening_ports(proc.pid)) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert ports, f"llama_cpp.server did not listen (exit code {proc.poll()})"
        b = HTTPBackend(f"http://127.0.0.1:{ports[0]}/v1", timeout=60, retries=30, backoff=0.5, max_backoff=2)
        [c] = b.generate([ChatRequest([{"role": "user", "content": "Say hi."}], max_tokens=8)])
        assert c.status is Status.OK, c.error
        assert c.completion_tokens <= 8
    finally:
        proc.terminate()
        proc.wait(timeout=30)
