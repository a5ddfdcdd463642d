"""lm-eval 0.4 interop: the task configs in ``evals/lm_eval_tasks/`` (MATH-500, AIME 2024/2025, GSM8K read
from the shared offline files, graded by rewardkit's verifier), materialised with absolute data paths and
run through ``lm_eval.simple_evaluate`` on a local model. lighteval's offline CLI is broken today, so
nothing here uses it."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from rewardkit.evals.data import data_path

TASKS_DIR = Path(__file__).resolve().parent / "lm_eval_tasks"


def task_names() -> list[str]:
    return sorted(p.stem for p in TASKS_DIR.glob("rewardkit_*.yaml"))


def materialise(dest: Path) -> Path:
    """Copy the task configs into ``dest`` with ``../shared/data/...`` replaced by the real data folder."""
    dest.mkdir(parents=True, exist_ok=True)
    root = data_path()
    for y in TASKS_DIR.glob("rewardkit_*.yaml"):
        text = re.sub(r"\.\./shared/data/(\S+)", lambda m: str(root / m.group(1)), y.read_text())
        (dest / y.name).write_text(text)
    shutil.copy(TASKS_DIR / "utils.py", dest / "utils.py")
    return dest


def run_lm_eval(model_path: str | Path, tasks: list[str], *, limit: int | None = None, max_gen_toks: int | None = None,
                batch_size: int = 1, device: str = "cpu", chat: bool = True) -> dict[str, Any]:
    """Run rewardkit's lm-eval tasks on a local Hugging Face model folder; returns lm-eval's results dict."""
    try:
        import lm_eval
        from lm_eval.tasks import TaskManager
    except ImportError:
        raise RuntimeError("lm-eval is not installed: pip install 'rewardkit[eval]' (lm-eval 0.4)") from None
    unknown = sorted(set(tasks) - set(task_names()))
    if unknown:
        raise ValueError(f"unknown task {unknown[0]!r}; rewardkit tasks: {', '.join(task_names())}")
    with tempfile.TemporaryDirectory(prefix="rewardkit-lm-eval-") as tmp:
        tm = TaskManager(include_path=str(materialise(Path(tmp))), include_defaults=False)
        gen = {"max_gen_toks": max_gen_toks} if max_gen_toks else None
        out = lm_eval.simple_evaluate(
            model="hf", model_args=f"pretrained={model_path},dtype=float32", tasks=tasks, task_manager=tm,
            limit=limit, batch_size=batch_size, device=device, apply_chat_template=chat,
            gen_kwargs=gen, log_samples=True)
    return out
