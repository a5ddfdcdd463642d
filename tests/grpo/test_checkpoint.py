"""Checkpoint pointer and metrics-log repair: what a kill at each moment leaves behind."""

from __future__ import annotations

import json
import os
import pickle
import sys
import zipfile

import pytest

from rewardkit.grpo.checkpoint import (
    MetricsLog,
    checkpoint_summary,
    latest_checkpoint,
    load_state,
    save_checkpoint,
)


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


def _adamw():
    """An AdamW optimizer after one step on 1,000 weights (its moments are the state a resume needs)."""
    import torch

    p = torch.nn.Parameter(torch.ones(1000))
    opt = torch.optim.AdamW([p])
    p.grad = torch.ones(1000)
    opt.step()
    return opt


def test_only_the_newest_checkpoint_keeps_the_optimizer_state_and_old_ones_go(tmp_path):
    from rewardkit.grpo.trainer import TrainConfig

    cfg = TrainConfig()
    assert cfg.checkpoint_every > 1 and cfg.keep_checkpoints >= 2  # not a 1.6 GB write every step by default
    opt = _adamw()
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


class _Sparse(_Tiny):
    """A stand-in whose weights file is ``nbytes`` long without taking the disk (a sparse file)."""

    def save_pretrained(self, path):
        with open(path / self.name, "wb") as f:
            f.truncate(self.nbytes)


def _save(out, step, **kw):
    return save_checkpoint(out, step, _Tiny("model.safetensors", 1000), _Tiny("tokenizer.json", 10), _adamw(),
                           {"x": step}, **kw)


def test_a_checkpoint_is_written_into_missing_folders_and_over_what_killed_writes_left(tmp_path):
    fresh = _save(tmp_path / "runs" / "a", 1)  # folders made as needed
    assert latest_checkpoint(tmp_path / "runs" / "a") == fresh
    out = tmp_path / "b"
    renamed = out / "ckpt-000010"  # a write killed after its rename, before ``latest`` named it
    own = out / f".ckpt-000010.{os.getpid()}.tmp"  # this process's write that failed
    other = out / ".ckpt-000009.4242.tmp"  # another process's, killed
    for d in (renamed, own, other):
        d.mkdir(parents=True)
        (d / "half.bin").write_bytes(b"x")
    final = _save(out, 10)
    assert final == renamed and latest_checkpoint(out) == final
    assert sorted(f.name for f in final.iterdir()) == ["model.safetensors", "state.json", "tokenizer.json", "trainer.pt"]
    assert not list(out.glob(".ckpt-*"))


def test_keep_is_a_whole_number_of_checkpoints_and_older_kept_ones_lose_only_their_optimizer(tmp_path):
    for keep in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match=f"keep={keep!r}: expected a whole number of checkpoints >= 1"):
            _save(tmp_path, 1, keep=keep)
    assert not list(tmp_path.iterdir())  # refused before anything was written
    for step in (1, 2, 3, 4):
        _save(tmp_path, step, keep=3)
    assert [(p.name, (p / "trainer.pt").exists()) for p in sorted(tmp_path.glob("ckpt-*"))] == \
        [("ckpt-000002", False), ("ckpt-000003", False), ("ckpt-000004", True)]
    _save(tmp_path, 5)  # the default keeps one
    assert [p.name for p in tmp_path.glob("ckpt-*")] == ["ckpt-000005"]


def test_an_old_checkpoint_that_cannot_be_removed_is_a_warning_and_the_new_one_stands(tmp_path, monkeypatch):
    import shutil

    _save(tmp_path, 1)

    def refuse(path, *a, **k):
        raise PermissionError(13, "Permission denied", str(path))
    monkeypatch.setattr(shutil, "rmtree", refuse)
    with pytest.warns(RuntimeWarning, match=r"could not remove .*ckpt-000001 \(Permission denied\); remove it by hand"):
        final = _save(tmp_path, 2)
    assert latest_checkpoint(tmp_path) == final and load_state(final)[0] == {"x": 2, "step": 2}


def test_extras_come_back_and_only_tensors_and_plain_data_are_unpickled(tmp_path, monkeypatch):
    import fractions

    import torch

    extra = {"mode0": {"replay": {"seen": 3, "rng_state": [3, [1, 2], None], "items": [{"question": "q"}]}},
             "mode1": {"model": {"w": torch.arange(3.0)}}}
    state, payload = load_state(_save(tmp_path, 1, extra=extra))
    assert state == {"x": 1, "step": 1} and payload["extra"]["mode0"] == extra["mode0"]
    assert torch.equal(payload["extra"]["mode1"]["model"]["w"], torch.arange(3.0))
    final = _save(tmp_path, 2)
    assert load_state(final)[1]["extra"] == {}  # none given: an empty dict, what the modes' loaders take
    # a trainer.pt holding another pickled object (it could run code) is refused, even where the environment asks
    # torch to unpickle anything by default
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    torch.save({"optimizer": {}, "extra": {"x": fractions.Fraction(1, 3)}}, final / "trainer.pt")
    with pytest.raises(pickle.UnpicklingError) as e:
        load_state(final)
    assert str(e.value).startswith(f"{final / 'trainer.pt'}: not read: rewardkit reads it as tensors and plain data "
                                   "only, since other pickled objects could run code (Unsupported global: GLOBAL "
                                   "fractions.Fraction was not an allowed global by default.")
    (final / "trainer.pt").write_bytes(b"not a pickle at all")  # a damaged file: torch's reason, on one line
    with pytest.raises(pickle.UnpicklingError, match=r"could run code \(Unsupported operand 110\)$"):
        load_state(final)
    # a torch whose message lacks those phrases: its whole message, whitespace collapsed
    def other_wording(*a, **k):
        raise pickle.UnpicklingError("bad\n  file")
    monkeypatch.setattr(torch, "load", other_wording)
    with pytest.raises(pickle.UnpicklingError, match=r"could run code \(bad file\)$"):
        load_state(final)


def test_a_checkpoint_written_on_a_gpu_resumes_on_a_cpu_only_machine(tmp_path):
    """torch.save records each tensor's device; this machine has no GPU, so a GPU run's trainer.pt is made by
    rewriting that record (pickle's BINUNICODE "cpu" -> "cuda:0") in a real one, as a GPU run writes it."""
    import torch

    final = _save(tmp_path, 1)
    path = final / "trainer.pt"
    with zipfile.ZipFile(path) as src:
        entries = [(n, src.read(n)) for n in src.namelist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as dst:
        for name, data in entries:
            dst.writestr(name, data.replace(b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0")
                         if name.endswith("data.pkl") else data)
    with pytest.raises(RuntimeError, match="CUDA device"):  # the record says cuda:0 now
        torch.load(path, weights_only=True)
    _, payload = load_state(final)
    assert payload["optimizer"]["state"][0]["exp_avg"].device.type == "cpu"


def test_checkpoint_summary_says_what_a_run_keeps_in_gb(tmp_path):
    assert checkpoint_summary(tmp_path) == "no checkpoint"
    for step in (1, 2, 3):  # SmolLM2-135M's sizes: 0.54 GB of fp32 weights
        save_checkpoint(tmp_path, step, _Sparse("model.safetensors", 540_000_000), _Tiny("tokenizer.json", 10),
                        _adamw(), {}, keep=3)
    newest = tmp_path / "ckpt-000003"
    with open(newest / "trainer.pt", "r+b") as f:  # AdamW's two moments, about 1.08 GB; GB are 10^9 bytes
        f.truncate(1_015_000_001)
    assert checkpoint_summary(tmp_path) == ("3 checkpoint(s), 2.64 GB: newest ckpt-000003 1.56 GB (optimizer state "
                                            "1.02 GB, needed to resume); older ones are weights only")
    (newest / "trainer.pt").unlink()
    assert "newest ckpt-000003 0.54 GB (optimizer state 0.00 GB" in checkpoint_summary(tmp_path)


def test_the_metrics_log_makes_its_folder_keeps_rows_without_a_step_and_does_without_tensorboard(tmp_path,
                                                                                                   monkeypatch):
    log = MetricsLog(tmp_path / "runs" / "a")  # tensorboard on by default where it is installed
    log.write({"step": 0, "reward_mean": 0.5})
    assert _lines(tmp_path / "runs" / "a" / "metrics.jsonl") == [{"step": 0, "reward_mean": 0.5}]
    log.close()
    assert list((tmp_path / "runs" / "a" / "tensorboard").iterdir())
    with open(log.path, "a") as f:
        f.write(json.dumps({"note": "resumed by hand"}) + "\n")
    rows = MetricsLog(tmp_path / "runs" / "a", tensorboard=False).resume(done_steps=1, last_row=None)
    assert rows == [{"step": 0, "reward_mean": 0.5}, {"note": "resumed by hand"}]
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # not installed: the JSONL log alone
    bare = MetricsLog(tmp_path / "b")
    bare.write({"step": 0, "loss": 1.0})
    bare.close()
    assert _lines(bare.path) == [{"step": 0, "loss": 1.0}] and not (tmp_path / "b" / "tensorboard").exists()
