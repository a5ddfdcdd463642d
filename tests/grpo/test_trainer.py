"""The GRPO loop: each method's paper settings, the loss the optimizer sees, two real CPU steps of the
embedded model, checkpoints, and resume after a real kill (the mechanics on a tiny random model)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from rewardkit.grpo import GRPOTrainer, TrainConfig, read_prompts
from rewardkit.grpo.toy_rewards import LengthScorer
from rewardkit.grpo.trainer import Rollouts
from rewardkit.scoring import BaseScorer
from rewardkit.types import Group, GroupScore, Status

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = [{"id": "a", "prompt": "Say hello."}, {"id": "b", "prompt": "Name a colour."}]
QUICK = dict(prompts_per_step=1, samples_per_prompt=2, max_new_tokens=4, lr=1e-4, num_threads=1, tensorboard=False)


def _prompts_file(tmp: Path) -> Path:
    p = tmp / "prompts.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in PROMPTS))
    return p


def _rows(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def _trainer(model: str, tmp: Path, **settings) -> GRPOTrainer:
    cfg = TrainConfig(model=model, out_dir=str(tmp / "run"), **{**QUICK, **settings})
    return GRPOTrainer(cfg, [Group("a", "Say hello.", [])], LengthScorer(target=10))


def _rollouts(trainer: GRPOTrainer, lengths: list[int], advantages: list[float], group: list[int] | None = None,
              weight: float = 1.0) -> Rollouts:
    """Hand-made rows: one short prompt, completions of the given lengths, the given advantages."""
    prompt = trainer.tokenizer("Say hello.").input_ids
    ids = trainer.tokenizer("one two three four five six seven eight").input_ids
    n = len(lengths)
    return Rollouts([prompt] * n, [ids[:k] for k in lengths], ["x"] * n, [False] * n,
                    group if group is not None else [0] * n, np.array(advantages, dtype=float),
                    np.ones(n, dtype=bool), weight)


# ------------------------------------------------------------------------ each method's own settings


def test_cispo_alone_brings_reasoning_arenas_is_clip_and_no_kl(tiny_model, tmp_path):
    t = _trainer(tiny_model, tmp_path, loss="cispo")
    c = t.config
    assert (c.eps_low, c.eps_high, c.beta, c.norm, c.advantage) == (1.0, 2.0, 0.0, "token", "grpo")  # eqs. 1-2
    assert t.ref_model is None  # no KL term: no reference model is loaded
    t2 = _trainer(tiny_model, tmp_path / "b", loss="cispo", beta=0.01, eps_high=5.0)  # overrides stay possible
    assert (t2.config.beta, t2.config.eps_high, t2.config.eps_low) == (0.01, 5.0, 1.0) and t2.ref_model is not None


def test_grpo_normalises_each_sequence_by_its_own_length_as_deepseekmath(tiny_model, tmp_path):
    # On-policy (ratio 1) the loss is -(1/G) sum_i (1/|o_i|) sum_t A_i = -(1/G) sum_i A_i: A = (+1, -1) gives 0
    # whatever the lengths (1 and 3 tokens). A token mean (the old default) gives -(1 * 1 - 1 * 3) / 4 = 0.5.
    t = _trainer(tiny_model, tmp_path, loss="grpo", beta=0.0)
    assert t.config.norm == "sequence"
    stats = t.update([_rollouts(t, [1, 3], [1.0, -1.0])])
    assert stats["loss"] == pytest.approx(0.0, abs=1e-6)


def test_dr_grpo_advantage_brings_its_constant_normaliser(tiny_model, tmp_path):
    # Dr. GRPO: sum over tokens / (B * budget) = -(1 * 1 - 1 * 3) / (2 * 4) = 0.25 with the 4-token budget.
    t = _trainer(tiny_model, tmp_path, advantage="dr_grpo", beta=0.0)
    assert t.config.norm == "constant"
    assert t.update([_rollouts(t, [1, 3], [1.0, -1.0])])["loss"] == pytest.approx(0.25, abs=1e-6)
    t2 = _trainer(tiny_model, tmp_path / "b", advantage="dr_grpo", norm="sequence", beta=0.0)  # unless set by hand
    assert t2.config.norm == "sequence"


def test_weighted_objectives_are_each_averaged_on_their_own(tiny_model, tmp_path):
    # RARO Alg. 2 line 17: lambda_pol J_pol + lambda_crit J_crit. Policy: 2 rows with A = +1; critic: 8 rows
    # with A = -1, 3 tokens each, lambda 1/2 each, on-policy: J_pol = +1, J_crit = -1, so the loss is
    # -(1/2 - 1/2) = 0. One pooled mean over the 10 rows would give -(1/2 * 6 - 1/2 * 24) / 30 = 0.3.
    t = _trainer(tiny_model, tmp_path, norm="token", beta=0.0)
    pol = _rollouts(t, [3, 3], [1.0, 1.0], weight=0.5)
    crit = _rollouts(t, [3] * 8, [-1.0] * 8, group=[0, 0, 1, 1, 2, 2, 3, 3], weight=0.5)
    assert t.update([pol, crit])["loss"] == pytest.approx(0.0, abs=1e-6)


def test_an_update_in_row_batches_takes_the_one_pass_gradient(tiny_model, tmp_path):
    # A 1.39B policy's one-pass update ran out of an H200's memory (engine_speed.md): past ``train_tokens`` the
    # loss is taken on a no-grad pass and its gradient goes back one row batch at a time. The optimizer must
    # see the same gradient: two updates per batch (the second clips, pi_old fixed), the KL term, two groups of
    # unequal lengths; the gradient norms agree (AdamW is blind to a gradient's scale) and so do the weights.
    settings = dict(loss="grpo", beta=0.04, updates_per_batch=2, lr=1e-2)
    whole = _trainer(tiny_model, tmp_path / "whole", **settings)
    split = _trainer(tiny_model, tmp_path / "split", train_tokens=24, **settings)
    rows = lambda t: [_rollouts(t, [1, 7, 3, 8], [1.0, -1.0, 0.5, -0.5], group=[0, 0, 1, 1]),  # noqa: E731
                      _rollouts(t, [2, 5], [1.0, -1.0], weight=0.5)]
    assert len(whole.learner.update_batches(rows(whole))) == 1
    batches = split.learner.update_batches(rows(split))
    assert len(batches) > 2 and sorted(i for b in batches for i in b) == list(range(6))  # every row, once
    a, b = whole.update(rows(whole)), split.update(rows(split))
    assert b["loss"] == pytest.approx(a["loss"], abs=1e-6) and b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-4)
    moved = 0.0
    for (name, p), q in zip(whole.model.named_parameters(), split.model.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-4), name  # AdamW's first steps move every weight by ~lr = 1e-2
    for p, q in zip(whole.model.parameters(), _trainer(tiny_model, tmp_path / "fresh").model.parameters(), strict=True):
        moved = max(moved, float((p - q).detach().abs().max()))
    assert moved > 1e-3  # the updates did move the weights (lr 1e-2), so agreeing is not agreeing on nothing


def test_a_mode_brings_its_papers_settings_and_hand_settings_still_win():
    from rewardkit.grpo.modes import RaroShared

    c = TrainConfig(beta=0.01).resolved(RaroShared.train_settings)
    assert (c.advantage, c.norm, c.eps_low, c.eps_high, c.overlong_filter) == ("dr_grpo", "constant", 0.2, 0.28, True)
    assert c.beta == 0.01  # set by hand: kept (App. C.1 says 1e-3)
    with pytest.raises(ValueError, match="lr"):
        TrainConfig().resolved({"lr": 1.0})  # presets only fill method settings


# ------------------------------------------------------------------------ the loop on real models


@pytest.mark.model
@pytest.mark.slow
def test_two_cpu_steps_of_the_embedded_model_write_metrics_and_a_checkpoint(tmp_path):
    cfg = TrainConfig(out_dir=str(tmp_path / "run"), steps=2, checkpoint_every=2, beta=0.04,
                      **{**QUICK, "prompts_per_step": 2, "max_new_tokens": 8})
    t = GRPOTrainer(cfg, read_prompts(_prompts_file(tmp_path)), LengthScorer(target=10))
    rows = t.train()
    run = tmp_path / "run"
    assert [r["step"] for r in rows] == [0, 1] == [r["step"] for r in _rows(run)]
    for r in rows:
        assert 0 < r["reward_mean"] <= 1 and r["ok_fraction"] == 1.0
        assert 1 <= r["response_length"] <= 8 and r["entropy"] > 0 and r["step_seconds"] > 0
    assert rows[0]["kl"] == pytest.approx(0.0, abs=1e-6)  # step 0 samples the reference policy itself
    assert rows[1]["kl"] > 0  # one AdamW step at lr 1e-4 moved the policy away from the reference
    assert (run / "latest").read_text().strip() == "ckpt-000002"
    state = json.loads((run / "ckpt-000002" / "state.json").read_text())
    assert state["step"] == 2 and state["last_metrics"] == rows[1] and state["config"]["norm"] == "sequence"
    p = next(t.model.parameters()).detach()
    q = next(t.ref_model.parameters()).detach()
    assert not np.allclose(p.numpy(), q.numpy())  # the policy's weights moved, the frozen reference's did not


@pytest.mark.slow
def test_killed_run_resumes_without_losing_or_repeating_a_step(tiny_model, tmp_path):
    """Kill a real `rewardkit train` process mid step 1 (its scorer blocks there), resume, get the straight run."""
    settings = {**QUICK, "prompts_per_step": 2, "max_new_tokens": 8, "model": tiny_model, "checkpoint_every": 1}
    straight = GRPOTrainer(TrainConfig(out_dir=str(tmp_path / "straight"), steps=2, **settings),
                           read_prompts(_prompts_file(tmp_path)), LengthScorer(target=10)).train()
    run, gate = tmp_path / "run", tmp_path / "gate"
    gate.write_text("")
    sets = [f"--set={k}={v}" for k, v in settings.items()]
    cmd = [sys.executable, "-c", "import conftest; from rewardkit.cli.app import main; main()", "train",
           str(_prompts_file(tmp_path)), "--scorer", "gate_scorer:GateScorer", "--set", "target=10", "--set", f"gate={gate}",
           "--out", str(run), "--steps", "2", *sets]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    deadline = time.time() + 300
    while not gate.with_suffix(".blocked").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
    os.killpg(proc.pid, signal.SIGKILL)  # mid step 1: its scorer is blocked, step 0 is checkpointed
    proc.wait()
    assert (run / "latest").read_text().strip() == "ckpt-000001"
    resumed = GRPOTrainer(TrainConfig(out_dir=str(run), steps=2, **settings), read_prompts(_prompts_file(tmp_path)),
                          LengthScorer(target=10))  # the same run, resumed (in-process: one interpreter start less)
    assert resumed.step == 1
    resumed.train()
    rows = _rows(run)
    assert [r["step"] for r in rows] == [0, 1]
    for key in ("reward_mean", "response_length", "loss", "kl", "entropy"):
        assert [r[key] for r in rows] == pytest.approx([r[key] for r in straight], rel=1e-5, abs=1e-7), key


# ------------------------------------------------------------------------ the pieces, no model


class _MaskSecond(BaseScorer):
    """Reward 1 for every response, but the second response of each group fails (status error)."""

    name = "mask-second"

    def _score(self, groups):
        out = []
        for g in groups:
            st = [Status.OK if i != 1 else Status.ERROR for i in range(len(g))]
            out.append(GroupScore(g.id, np.where(np.arange(len(g)) == 1, np.nan, 1.0), st))
        return out


def test_batches_are_a_seeded_walk_over_epochs():
    # batch_prompts needs no model: build a trainer shell around the method
    t = GRPOTrainer.__new__(GRPOTrainer)
    t.config = TrainConfig(prompts_per_step=3, seed=5)
    t.prompts = [Group(str(i), f"p{i}", []) for i in range(4)]
    seen = [g.id for s in range(4) for g in t.batch_prompts(s)]
    assert sorted(seen[:4]) == sorted(seen[4:8]) == sorted(seen[8:12]) == ["0", "1", "2", "3"]  # each epoch once
    assert [g.id for g in t.batch_prompts(2)] == [g.id for g in t.batch_prompts(2)]  # a pure function of step


def test_non_ok_responses_get_no_advantage_and_are_masked():
    t = GRPOTrainer.__new__(GRPOTrainer)
    t.config = TrainConfig(samples_per_prompt=3, overlong_filter=True)
    groups = [Group("g", "p", ["x", "y", "z"])]
    r = Rollouts([[1]] * 3, [[2]] * 3, ["x", "y", "z"], [False, False, True], [0, 0, 0])
    t.assign_advantages(r, _MaskSecond().score(groups))
    assert r.valid.tolist() == [True, False, False]  # error masked; the truncated one filtered
    assert r.advantages.tolist() == [0.0, 0.0, 0.0]  # one valid response left: no group-relative signal


def test_config_validation_names_the_option():
    with pytest.raises(ValueError, match="option 'samples_per_prompt'"):
        TrainConfig(samples_per_prompt=0)
    with pytest.raises(ValueError, match="option 'temperature'"):
        TrainConfig(temperature=0)
    with pytest.raises(ValueError, match="option 'loss'"):
        TrainConfig(loss="ppo")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="option 'eps_high'"):
        TrainConfig(eps_high=-0.1)


def test_cli_settings_are_coerced_by_the_scorers_coercer():
    import typer
    from rewardkit.cli.train import train_config

    c = train_config({"loss": "cispo", "beta": "none", "overlong_filter": "yes", "steps": "3"})
    assert (c.loss, c.beta, c.overlong_filter, c.steps) == ("cispo", None, True, 3)
    with pytest.raises(typer.BadParameter, match="steps"):
        train_config({"steps": "many"})
    with pytest.raises(typer.BadParameter, match="no option"):
        train_config({"bogus": "1"})


def test_step_metrics_count_routed_and_non_diverse_groups_and_judge_calls():
    from rewardkit.types import Cost

    t = GRPOTrainer.__new__(GRPOTrainer)
    routed = GroupScore("a", np.array([1.0, 0.0]), [Status.OK] * 2, stats={"routed": True},
                        cost=Cost(judge_calls=3))
    flat = GroupScore("b", np.array([1.0, 1.0]), [Status.OK] * 2, stats={"routed": False})
    masked = GroupScore("c", np.array([np.nan, 0.5]), [Status.TIMEOUT, Status.OK])
    r = Rollouts([[1]] * 6, [[2, 3]] * 3 + [[4]] * 3, ["x"] * 6, [True] + [False] * 5, [0, 0, 1, 1, 2, 2])
    m = t.reward_metrics([routed, flat, masked], r)
    assert m["routed_fraction"] == pytest.approx(1 / 3) and m["judge_calls"] == 3
    assert m["non_diverse_fraction"] == pytest.approx(2 / 3)  # b (all 1) and c (one valid response)
    assert m["reward_mean"] == pytest.approx((1 + 0 + 1 + 1 + 0.5) / 5) and m["ok_fraction"] == pytest.approx(5 / 6)
    assert m["response_length"] == pytest.approx(1.5) and m["truncated_fraction"] == pytest.approx(1 / 6)
