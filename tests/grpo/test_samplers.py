"""Rollouts sampled by a colocated vLLM engine (vLLM's CPU build, scripts/vllm_cpu_env.sh runs the tests marked
``vllm`` with none skipped), checked against the policy being trained: the embedded SmolLM2-135M in fp32.

``TOL``: |log pi_vllm(token) - log pi_policy(token)| for every sampled token, fp32 on both sides. vLLM's CPU kernels
sum in another order than torch's; measured up to 4.2e-5 at every step of benchmarks/vllm_sampler.py (2e-5 for the
judge in tests/backends/test_vllm.py), so 1e-3 leaves room and is still 30x below what the steps here move the
first draw's log-probs (asserted below).

Loss-path parity: two temperature-1 samplers never draw the same tokens (their random streams differ), and
greedy sampling would give every group identical responses, hence zero advantages and a loss path of zeros that
tests nothing. So the transformers run is fed the vLLM run's token sequences step by step (the same rollouts), and
the vLLM run checks at every step that those tokens were drawn from the policy being trained (sampler log-probs
== the policy's, within TOL): a stale engine fails that check from step 1 on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rewardkit.grpo import GRPOTrainer, TrainConfig
from rewardkit.grpo.samplers import TransformersSampler, WeightSyncError, choose_sampler
from rewardkit.grpo.toy_rewards import LengthScorer
from rewardkit.types import Group

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TOL = 1e-3
PROMPTS = [Group("a", "Say hello.", []), Group("b", "Name a colour.", []), Group("c", "Count to three.", [])]
SETTINGS = dict(model="smollm2", dtype="float32", prompts_per_step=2, samples_per_prompt=4, max_new_tokens=12,
                beta=0.0, checkpoint_every=100, tensorboard=False, seed=3)


@pytest.fixture
def needs_vllm():
    pytest.importorskip("vllm", reason="vLLM is not installed: scripts/vllm_cpu_env.sh builds its CPU environment "
                                       "and runs the tests marked vllm")


def _trainer(tmp: Path, name: str, sampler: str, **settings) -> GRPOTrainer:
    cfg = TrainConfig(out_dir=str(tmp / name), sampler=sampler, **{**SETTINGS, **settings})
    return GRPOTrainer(cfg, PROMPTS, LengthScorer(target=20))


def _policy_logprobs(trainer: GRPOTrainer, r) -> list[np.ndarray]:
    import torch

    with torch.no_grad():
        logp, mask, _ = trainer.learner.logprobs(trainer.model, [r])
    return [logp[i][mask[i]].numpy() for i in range(len(r))]


def _max_diff(trainer: GRPOTrainer, r) -> float:
    mine = _policy_logprobs(trainer, r)
    return max(float(np.abs(np.array(s) - m).max()) for s, m in zip(r.sampler_logprobs, mine, strict=True))


def test_auto_picks_transformers_without_vllm_and_a_given_sampler_always_wins(monkeypatch):
    import rewardkit.grpo.samplers as samplers

    monkeypatch.setattr(samplers, "vllm_importable", lambda: False)
    assert choose_sampler("auto", "cpu", 10, 0.3) == "transformers"
    assert choose_sampler("vllm", "cpu", 10, 0.3) == "vllm" and choose_sampler("transformers", "cpu", 10, 0.3) == "transformers"
    with pytest.raises(ValueError, match="vllm_memory"):
        TrainConfig(vllm_memory=1.0)


@pytest.mark.vllm
@pytest.mark.slow
def test_vllm_samples_the_trained_policy_and_takes_the_transformers_loss_path(needs_vllm, tmp_path, monkeypatch):
    """One vLLM run of 3 steps: its draws are the policy's (before and after each sync), a step changes them, the
    transformers trainer fed the same rollouts takes the same loss path, and a failed sync leaves it refusing."""
    v = _trainer(tmp_path, "v", "vllm", steps=3, lr=3e-4)
    try:
        assert v.learner.sampler.name == "vllm" and choose_sampler("auto", "cpu", 10**9, 0.3) == "vllm"
        chats = [v.chat(g.prompt) for g in PROMPTS]
        before = v.sample(chats, 4, seed_key=(99, 0))
        eos = v.tokenizer.eos_token_id
        assert len(before) == 12 and before.group == [i // 4 for i in range(12)]
        for toks, cut in zip(before.completion_ids, before.truncated, strict=True):  # the trainer's stop rule
            assert (len(toks) == 12 and eos not in toks) if cut else (toks[-1] == eos and eos not in toks[:-1])
        assert _max_diff(v, before) < TOL  # the engine starts on the policy's weights
        assert v.sample(chats, 4, seed_key=(99, 0)).completion_ids == before.completion_ids  # seeded: same draw

        drawn = []
        inner = v.learner.sample

        def record(chats, n, seed_key, max_new_tokens=None):
            r = inner(chats, n, seed_key, max_new_tokens)
            drawn.append(r)
            return r

        v.learner.sample = record
        v_rows = v.train()
        v.learner.sample = inner
        # every step learnt from the policy's own distribution: a stale engine fails this from step 1 on
        assert all(r["sampler_logp_diff_max"] < TOL for r in v_rows)
        after = v.sample(chats, 4, seed_key=(99, 0))
        assert after.completion_ids != before.completion_ids  # the steps changed vLLM's samples: weights synced
        assert _max_diff(v, after) < TOL  # ... to exactly the trained policy's
        assert _max_diff(v, before) > 30 * TOL  # the steps moved the policy far enough for a stale engine to fail

        def broken(*a, **kw):
            raise RuntimeError("injected: the engine refused the weights")

        monkeypatch.setattr(v.learner.sampler.backend.llm, "collective_rpc", broken)
        with pytest.raises(WeightSyncError, match="injected"):
            v.learner.sync()
        with pytest.raises(WeightSyncError, match="stale"):  # never the old weights, silently
            v.sample(chats, 2, seed_key=(0, 0))
    finally:
        v.close()

    t = _trainer(tmp_path, "t", "transformers", steps=3, lr=3e-4)
    assert isinstance(t.learner.sampler, TransformersSampler)

    class Replay(TransformersSampler):
        def sample(self, prompts, n, max_new_tokens, temperature, top_p, seed):
            r = drawn.pop(0)
            assert [list(p) for p in prompts] == r.prompt_ids[::n]  # the same prompts, rendered the same way
            return [(c, not cut, None) for c, cut in zip(r.completion_ids, r.truncated, strict=True)]

    t.learner.sampler = Replay(t.learner.backend)
    t_rows = t.train()
    assert not drawn
    for a, b in zip(v_rows, t_rows, strict=True):
        assert a["reward_mean"] == b["reward_mean"] and a["response_length"] == b["response_length"]
        for key in ("loss", "grad_norm", "entropy"):
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key
    # a real path: every step had a gradient, each its own (the loss itself is ~0 at mu = 1: mean-zero advantages)
    assert len({round(r["grad_norm"], 4) for r in v_rows}) == 3 and min(r["grad_norm"] for r in v_rows) > 0


@pytest.mark.vllm
@pytest.mark.slow
def test_rewardkit_train_with_sampler_vllm_runs_and_a_failed_sync_is_one_line(needs_vllm, tmp_path, monkeypatch):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": g.prompt}) + "\n" for g in PROMPTS))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [str(prompts), "--scorer", "rewardkit.grpo.toy_rewards:LengthScorer", "--steps", "2", "--set",
            "sampler=vllm", "--set", "dtype=float32", "--set", "samples_per_prompt=2", "--set", "max_new_tokens=8",
            "--set", "tensorboard=false"]
    ok = subprocess.run([str(BIN / "rewardkit"), "train", *args, "--out", str(tmp_path / "ok")], env=env,
                        capture_output=True, text=True, timeout=600)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "rollouts sampled with vllm" in ok.stderr
    rows = [json.loads(x) for x in (tmp_path / "ok" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1] and all(r["sampler_logp_diff_max"] < TOL for r in rows)

    # the failure in-process (CliRunner: no second interpreter to start), the load refused at the first sync
    from rewardkit.cli.app import app
    from typer.testing import CliRunner

    from rewardkit.backends.vllm_backend import VLLMBackend

    def broken(self, weights):
        raise RuntimeError("injected: no room for the weights")

    monkeypatch.setattr(VLLMBackend, "load_weights", broken)
    bad = CliRunner().invoke(app, ["train", *args, "--out", str(tmp_path / "bad")])
    assert bad.exit_code == 1 and not isinstance(bad.exception, RuntimeError), bad.output[-2000:]
    errors = [x for x in bad.output.splitlines() if "error" in x.lower() and "WARNING" not in x]
    assert errors == ["error: step 0: loading the policy's weights into vLLM failed: RuntimeError: injected: no "
                      "room for the weights"], bad.output[-2000:]
    assert "Traceback" not in bad.output
    log = tmp_path / "bad" / "metrics.jsonl"
    assert not log.exists() or not log.read_text().strip()  # no step was recorded


@pytest.mark.vllm
@pytest.mark.slow
def test_raros_critic_judges_on_the_samplers_engine(needs_vllm, tmp_path, monkeypatch):
    """RARO's shared LLM: the critic is the policy, so it judges through the one vLLM engine kept in step."""
    from rewardkit.backends.vllm_backend import VLLMBackend
    from rewardkit.grpo.modes import RaroShared

    made = []
    init = VLLMBackend.__init__

    def counted(self, *a, **kw):
        made.append(self)
        init(self, *a, **kw)

    monkeypatch.setattr(VLLMBackend, "__init__", counted)
    cfg = TrainConfig(out_dir=str(tmp_path / "raro"), sampler="vllm", **SETTINGS)
    t = GRPOTrainer(cfg, PROMPTS, modes=[RaroShared()])
    try:
        engine = t.learner.sampler.backend
        assert made == [engine]  # one engine, one copy of the weights in it, for sampling and judging
        assert t.policy is engine and t.scorer.options.judge is engine
    finally:
        t.close()
