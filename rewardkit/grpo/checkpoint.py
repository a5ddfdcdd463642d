"""Crash-safe training checkpoints and the per-step metrics log.

A checkpoint is a folder ``ckpt-<step>`` written under a temporary name and renamed into place, then the
``latest`` pointer file is replaced atomically: a kill at any moment leaves either the previous or the
new checkpoint complete, never a half-written one. The metrics log is JSONL, one fsync'd row per step;
on resume it is cut back to the steps the checkpoint holds (and the checkpoint's own last row restored),
so no step is lost or counted twice.

Only the newest checkpoint carries the optimizer state (``trainer.pt``) that resuming needs; older kept
ones are cut to weights only. For SmolLM2-135M in fp32 that is 1.6 GB for the newest (0.54 GB weights +
1.08 GB AdamW moments) and 0.54 GB for each older one: ``checkpoint_summary`` says what a run holds.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import warnings
from pathlib import Path
from typing import Any

import torch

from rewardkit.runtime.jobs import repair_jsonl
from rewardkit.runtime.output import fsync_dir, write_atomic

LATEST = "latest"


def save_checkpoint(out_dir: str | Path, step: int, model: Any, tokenizer: Any, optimizer: torch.optim.Optimizer,
                    state: dict[str, Any], extra: dict[str, Any] | None = None, keep: int = 1) -> Path:
    """Write checkpoint ``step`` (the number of finished steps) atomically; keep the newest ``keep``.

    ``state`` is JSON (step counters, the step's metrics row, config); ``extra`` holds tensors and plain data
    (e.g. a second model's optimizer or a mode's state: what ``load_state`` reads back without unpickling code).
    An old checkpoint that cannot be removed is a warning, never an error: the new one is complete by then.
    """
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise ValueError(f"save_checkpoint: keep={keep!r}: expected a whole number of checkpoints >= 1")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    final = out / f"ckpt-{step:06d}"
    tmp = out / f".ckpt-{step:06d}.{os.getpid()}.tmp"
    if tmp.exists():  # this process's own, from a write that failed
        shutil.rmtree(tmp)
    tmp.mkdir()
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    torch.save({"optimizer": optimizer.state_dict(), "extra": extra or {}}, tmp / "trainer.pt")
    (tmp / "state.json").write_text(json.dumps({**state, "step": step}, indent=1))
    for f in tmp.iterdir():
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())
    if final.exists():  # a leftover from a run killed after this rename, before ``latest`` named it
        shutil.rmtree(final)
    os.replace(tmp, final)
    fsync_dir(out)
    write_atomic(out / LATEST, (final.name + "\n").encode())  # fsyncs the folder after its rename
    done = sorted(p for p in out.glob("ckpt-*") if p.is_dir())
    for old in done[:-keep]:
        _remove(old)
    for older in done[-keep:-1]:  # resuming reads only the newest: weights-only here
        _remove(older / "trainer.pt")
    for stale in out.glob(".ckpt-*.tmp"):  # other processes' writes, killed before their rename
        _remove(stale)
    return final


def _remove(path: Path) -> None:
    """Remove a file or folder the newest checkpoint no longer needs; a failure is a warning naming it."""
    try:
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        pass
    except OSError as e:
        warnings.warn(f"checkpoint: could not remove {path} ({e.strerror or e}); remove it by hand to free the space",
                      RuntimeWarning, stacklevel=3)


def checkpoint_summary(out_dir: str | Path) -> str:
    """One line: how many checkpoints a run folder keeps and their sizes (newest: weights + optimizer)."""
    done = sorted(p for p in Path(out_dir).glob("ckpt-*") if p.is_dir())
    if not done:
        return "no checkpoint"

    def gb(paths: list[Path]) -> float:
        return sum(f.stat().st_size for p in paths for f in (p.rglob("*") if p.is_dir() else [p]) if f.is_file()) / 1e9

    new = done[-1]
    opt = gb([new / "trainer.pt"]) if (new / "trainer.pt").exists() else 0.0
    total = gb(done)
    return (f"{len(done)} checkpoint(s), {total:.2f} GB: newest {new.name} {gb([new]):.2f} GB "
            f"(optimizer state {opt:.2f} GB, needed to resume); older ones are weights only")


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    """The folder the ``latest`` pointer names, or None when no checkpoint was ever completed."""
    p = Path(out_dir) / LATEST
    if not p.exists():
        return None
    ckpt = Path(out_dir) / p.read_text().strip()
    if not (ckpt / "state.json").exists():
        raise FileNotFoundError(f"{p} points at {ckpt}, which is not a complete checkpoint")
    return ckpt


def load_state(ckpt: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The checkpoint's JSON state and its torch payload (optimizer state, extras), read as tensors and plain data
    only: a ``trainer.pt`` that holds other pickled objects (or is not a pickle at all) is refused with torch's
    reason, since unpickling other objects could run code."""
    state = json.loads((ckpt / "state.json").read_text())
    try:
        payload = torch.load(ckpt / "trainer.pt", map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:  # torch's own reason sits between these two phrases of its message
        text = str(e)
        why = text.partition("WeightsUnpickler error:")[2].partition("Check the documentation")[0]
        why = " ".join(why.split()) or " ".join(text.split())
        raise pickle.UnpicklingError(f"{ckpt / 'trainer.pt'}: not read: rewardkit reads it as tensors and plain data "
                                     f"only, since other pickled objects could run code ({why[:300]})") from None
    return state, payload


class MetricsLog:
    """Per-step metrics as JSONL (one fsync'd line per step) and TensorBoard scalars when installed."""

    def __init__(self, out_dir: str | Path, tensorboard: bool = True):
        self.path = Path(out_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard is optional
                self.tb = None
            else:
                self.tb = SummaryWriter(str(Path(out_dir) / "tensorboard"))

    def resume(self, done_steps: int, last_row: dict[str, Any] | None) -> list[dict[str, Any]]:
        """Keep rows of steps < ``done_steps``; restore the checkpoint's last row if the kill came first."""
        rows = [r for r in repair_jsonl(self.path) if r.get("step", -1) < done_steps]
        if last_row is not None and not any(r.get("step") == last_row.get("step") for r in rows):
            rows.append(last_row)
        write_atomic(self.path, "".join(json.dumps(r) + "\n" for r in rows).encode())
        return rows

    def write(self, row: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
            f.flush()
            os.fsync(f.fileno())
        if self.tb is not None:
            for k, v in row.items():
                if isinstance(v, (int, float)) and k != "step":
                    self.tb.add_scalar(k, v, row["step"])
            self.tb.flush()

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
