"""Checkpoint pointer and metrics-log repair: what a kill at each moment leaves behind."""

from __future__ import annotations

import json

import pytest

from rewardkit.grpo.checkpoint import MetricsLog, latest_checkpoint


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_resume_cuts_rows_past_the_checkpoint_and_a_half_written_line(tmp_path):
    log = MetricsLog(tmp_path, tensorboard=False)
    for s in range(3):
        log.write({"step": s, "reward_mean": s / 10})
    with open(log.path, "a") as f:
        f.write('{"step": 3, "rew')  # killed mid-write
    rows = log.resume(done_steps=2, last_row={"step": 1, "reward_mean": 0.1})
    assert [r["step"] for r in rows] == [0, 1] == [r["step"] for r in _lines(log.path)]


def test_resume_restores_the_checkpoints_row_when_the_kill_came_before_the_log_line(tmp_path):
    log = MetricsLog(tmp_path, tensorboard=False)
    log.write({"step": 0, "reward_mean": 0.0})
    rows = log.resume(done_steps=2, last_row={"step": 1, "reward_mean": 0.5})  # step 1 checkpointed, not logged
    assert rows == _lines(log.path) == [{"step": 0, "reward_mean": 0.0}, {"step": 1, "reward_mean": 0.5}]


def test_latest_pointer_must_name_a_complete_checkpoint(tmp_path):
    assert latest_checkpoint(tmp_path) is None
    (tmp_path / "latest").write_text("ckpt-000003\n")
    with pytest.raises(FileNotFoundError, match="not a complete checkpoint"):
        latest_checkpoint(tmp_path)
    (tmp_path / "ckpt-000003").mkdir()
    (tmp_path / "ckpt-000003" / "state.json").write_text("{}")
    assert latest_checkpoint(tmp_path).name == "ckpt-000003"


def test_tensorboard_scalars_are_written_when_tensorboard_is_installed(tmp_path):
    pytest.importorskip("tensorboard", reason="tensorboard not installed (optional: pip install tensorboard)")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log = MetricsLog(tmp_path, tensorboard=True)
    log.write({"step": 0, "reward_mean": 0.25, "note": "text is skipped"})
    log.write({"step": 1, "reward_mean": 0.75, "note": "text is skipped"})
    log.close()
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    assert acc.Tags()["scalars"] == ["reward_mean"]
    assert [(e.step, e.value) for e in acc.Scalars("reward_mean")] == [(0, 0.25), (1, 0.75)]


class _Tiny:
    """A model/tokenizer stand-in that writes a weights file of a known size, as save_pretrained does."""

    def __init__(self, name, nbytes):
        self.name, self.nbytes = name, nbytes

    def save_pretrained(self, path):
        (path / self.name).write_bytes(b"w" * self.nbytes)


def test_only_the_newest_checkpoint_keeps_the_optimizer_state_and_old_ones_go(tmp_path):
    import torch

    from rewardkit.grpo.checkpoint import checkpoint_summary, load_state, save_checkpoint
    from rewardkit.grpo.trainer import TrainConfig

    cfg = TrainConfig()
    assert cfg.checkpoint_every > 1 and cfg.keep_checkpoints >= 2  # not a 1.6 GB write every step by default
    p = torch.nn.Parameter(torch.ones(1000))
    opt = torch.optim.AdamW([p])
    p.grad = torch.ones(1000)
    opt.step()
    out = tmp_path
    for step in (10, 20, 30):
        save_checkpoint(out, step, _Tiny("model.safetensors", 1000), _Tiny("tokenizer.json", 10), opt, {"x": step}, keep=2)
    kept = sorted(q.name for q in out.glob("ckpt-*"))
    assert kept == ["ckpt-000020", "ckpt-000030"] and (out / "latest").read_text().strip() == "ckpt-000030"
    assert not (out / "ckpt-000020" / "trainer.pt").exists()  # weights only
    assert (out / "ckpt-000020" / "model.safetensors").stat().st_size == 1000
    state, payload = load_state(out / "ckpt-000030")  # the newest resumes: optimizer moments intact
    assert state["step"] == 30 and payload["optimizer"]["state"][0]["exp_avg"].shape == (1000,)
    assert checkpoint_summary(out).startswith("2 checkpoint(s)") and "newest ckpt-000030" in checkpoint_summary(out)
