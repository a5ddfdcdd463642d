"""ProcessBench (Zheng et al., ACL 2025, arXiv:2412.06559): find the earliest erroneous step of a solution.

Loader for the shared JSONL snapshot, the ProcessBench metric (per split: accuracy on erroneous solutions =
predicted earliest error == label, accuracy on correct solutions = predicted -1, F1 = their harmonic
mean), step-level precision/recall of the discriminator's NO verdicts, and a runner that judges every step
(or every re-sliced slice) of every solution with GAR's slice discriminator in ONE backend call.

The earliest error is predicted as the first NO. An invalid (unparseable) verdict is never a NO: the step
counts as passed, and the number of invalid verdicts is reported beside the metric.
"""

from __future__ import annotations

import json
import math
import os
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from rewardkit.evals.data import data_path

from rewardkit.gar.slices import SliceItem, SliceJudgment, SliceScorer
from rewardkit.types import Status

Unit = Literal["steps", "reslice"]  # what one verdict covers: a labelled step, or a GAR slice of the joined steps

SPLITS = ("gsm8k", "math", "olympiadbench", "omnimath")
STEP_SEPARATOR = "\n\n"  # how the steps of a solution are joined for the re-slicing mode


def default_root() -> Path:
    """``$REWARDKIT_PROCESSBENCH``, else ``shared/data/processbench`` (see ``rewardkit.evals.data``)."""
    if os.environ.get("REWARDKIT_PROCESSBENCH"):
        return Path(os.environ["REWARDKIT_PROCESSBENCH"])
    return data_path("processbench")


@dataclass(frozen=True)
class PBExample:
    """One ProcessBench row: ``label`` is the 0-based earliest erroneous step, -1 if all steps are correct."""

    id: str
    split: str
    problem: str
    steps: tuple[str, ...]
    label: int
    final_answer_correct: bool
    generator: str = ""


def load_processbench(
    split: str, root: str | Path | None = None, limit: int | None = None, seed: int = 0
) -> list[PBExample]:
    """Rows of one split; ``limit`` takes a seeded sample, half erroneous / half error-free (file order kept)."""
    from rewardkit.runtime.jobs import positive_int

    limit = None if limit is None else positive_int("--limit", limit)  # 0 kept no row; -1 failed in random.sample
    if split not in SPLITS:
        raise ValueError(f"unknown ProcessBench split {split!r}; splits: {', '.join(SPLITS)}")
    path = Path(root or default_root()) / f"{split}.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"ProcessBench file not found: {path} (set REWARDKIT_PROCESSBENCH)")
    rows = []
    with path.open() as f:
        for ln, line in enumerate(f, 1):
            if not line.strip():
                continue
            d = json.loads(line)
            try:
                ex = PBExample(d["id"], d.get("split", split), d["problem"], tuple(d["steps"]), int(d["label"]),
                               bool(d["final_answer_correct"]), d.get("generator", ""))
            except KeyError as e:
                raise ValueError(f"{path}:{ln}: missing field {e}") from None
            if not -1 <= ex.label < len(ex.steps):
                raise ValueError(f"{path}:{ln}: label {ex.label} outside the {len(ex.steps)} steps")
            rows.append(ex)
    if limit is None or limit >= len(rows):
        return rows
    rng = random.Random(seed)
    err = [i for i, r in enumerate(rows) if r.label >= 0]
    ok = [i for i, r in enumerate(rows) if r.label < 0]
    n_err = min(len(err), limit - min(len(ok), limit // 2))
    keep = set(rng.sample(err, n_err)) | set(rng.sample(ok, min(len(ok), limit - n_err)))
    return [r for i, r in enumerate(rows) if i in keep]


# ---------------------------------------------------------------------------------------- metric


def earliest_error(verdicts: Sequence[str | None]) -> int:
    """Index of the first "NO" verdict, -1 when there is none (an invalid verdict, None, is not a NO)."""
    for i, v in enumerate(verdicts):
        if v == "NO":
            return i
    return -1


def harmonic_mean(a: float, b: float) -> float:
    """2ab / (a + b), 0 when both are 0 (ProcessBench's F1 of the two accuracies)."""
    return 0.0 if a + b == 0 else 2 * a * b / (a + b)


def processbench_metric(predictions: Sequence[int], labels: Sequence[int]) -> dict[str, float]:
    """ProcessBench: accuracy on erroneous samples (pred == label), on correct samples (pred == -1), F1."""
    if len(predictions) != len(labels):
        raise ValueError(f"processbench_metric: {len(predictions)} predictions for {len(labels)} labels")
    err = [p == y for p, y in zip(predictions, labels, strict=True) if y >= 0]
    cor = [p == -1 for p, y in zip(predictions, labels, strict=True) if y < 0]
    a = float(np.mean(err)) if err else math.nan
    b = float(np.mean(cor)) if cor else math.nan
    f1 = harmonic_mean(a, b) if err and cor else math.nan
    return {"error_acc": a, "correct_acc": b, "f1": f1, "n_error": len(err), "n_correct": len(cor)}


def unit_labels(unit_steps: Sequence[Sequence[int]], label: int) -> list[bool | None]:
    """Per judged unit (a step, or a slice covering some steps): True if erroneous, False if correct, None
    if unlabelled. Steps before the earliest error are correct, the labelled step is wrong, later steps
    are unannotated; a unit containing the labelled step is wrong, a unit wholly before it is correct."""
    out: list[bool | None] = []
    for steps in unit_steps:
        if label < 0 or max(steps) < label:
            out.append(False)
        elif min(steps) <= label <= max(steps):
            out.append(True)
        else:
            out.append(None)
    return out


def detection_stats(verdicts: Sequence[str | None], truth: Sequence[bool | None]) -> dict[str, int]:
    """Confusion counts of NO = "erroneous" over the labelled units (invalid verdicts counted apart)."""
    c = {"tp": 0, "fp": 0, "fn": 0, "tn": 0, "invalid": 0}
    for v, t in zip(verdicts, truth, strict=True):
        if t is None:
            continue
        if v is None:
            c["invalid"] += 1
            continue
        no = v == "NO"
        c["tp" if no and t else "fp" if no else "fn" if t else "tn"] += 1
    return c


def precision_recall(c: dict[str, int]) -> dict[str, float]:
    """Precision and recall of the NO verdicts as error detections (NaN when undefined)."""
    p = c["tp"] / (c["tp"] + c["fp"]) if c["tp"] + c["fp"] else math.nan
    r = c["tp"] / (c["tp"] + c["fn"]) if c["tp"] + c["fn"] else math.nan
    return {"precision": p, "recall": r}


# --------------------------------------------------------------------------------------- running


def step_offsets(steps: Sequence[str], sep: str = STEP_SEPARATOR) -> list[tuple[int, int]]:
    """Character span of each step in ``sep.join(steps)`` (the separator belongs to the step before)."""
    out, pos = [], 0
    for i, s in enumerate(steps):
        end = pos + len(s) + (len(sep) if i < len(steps) - 1 else 0)
        out.append((pos, end))
        pos = end
    return out


def slices_to_steps(steps: Sequence[str], bounds: Sequence[tuple[int, int]], sep: str = STEP_SEPARATOR) -> list[list[int]]:
    """For each slice (start, end) of the joined text, the indices of the steps it overlaps."""
    offs = step_offsets(steps, sep)
    return [[i for i, (a, b) in enumerate(offs) if a < e and s < b] for s, e in bounds]


@dataclass
class PBPrediction:
    """One solution's judged units and the predicted earliest error step."""

    id: str
    split: str
    label: int
    prediction: int
    unit_steps: list[list[int]]
    verdicts: list[str | None]
    p_yes: list[float | None]
    statuses: list[str]


def _units(ex: PBExample, unit: Unit, scorer: SliceScorer) -> tuple[list[str], list[list[int]], list[str]]:
    """The texts judged for one solution, the steps each covers, and the earlier text shown as context."""
    if unit == "steps":
        ctx = [STEP_SEPARATOR.join(ex.steps[:i]) for i in range(len(ex.steps))]
        return list(ex.steps), [[i] for i in range(len(ex.steps))], ctx
    joined = STEP_SEPARATOR.join(ex.steps)
    sl = scorer.slices(joined)
    return [s.text for s in sl], slices_to_steps(ex.steps, [(s.start, s.end) for s in sl]), [joined[: s.start] for s in sl]


def predict(examples: Sequence[PBExample], scorer: SliceScorer, unit: Unit = "steps") -> list[PBPrediction]:
    """Judge every unit of every solution in ONE ``scorer.judge_slices`` call; earliest error = first NO's step."""
    if unit not in ("steps", "reslice"):
        raise ValueError(f"unit must be 'steps' or 'reslice', got {unit!r}")
    plans, items = [], []
    for ex in examples:
        texts, steps, ctx = _units(ex, unit, scorer)
        plans.append(steps)
        items += [SliceItem(ex.problem, t, c if scorer.options.context else "") for t, c in zip(texts, ctx, strict=True)]
    judged: list[SliceJudgment] = scorer.judge_slices(items)
    out, k = [], 0
    for ex, steps in zip(examples, plans, strict=True):
        js = judged[k : k + len(steps)]
        k += len(steps)
        verdicts = [j.verdict if j.status is Status.OK else None for j in js]
        first = earliest_error(verdicts)
        pred = -1 if first < 0 else min(steps[first])
        out.append(PBPrediction(ex.id, ex.split, ex.label, pred, steps, verdicts, [j.p_yes for j in js],
                                [j.status.value for j in js]))
    return out


def _auroc(p_yes: list[float], wrong: list[bool]) -> float:
    """AUROC of 1 - P(YES) for erroneous units (threshold-free; NaN when one class is missing)."""
    if len(set(wrong)) < 2 or not p_yes:
        return math.nan
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(wrong, [1 - p for p in p_yes]))


def summarize(preds: Sequence[PBPrediction]) -> dict[str, Any]:
    """Per-split ProcessBench metric, step-level precision/recall (and AUROC in logit mode), invalid counts."""
    out: dict[str, Any] = {}
    for split in sorted({p.split for p in preds}, key=lambda s: SPLITS.index(s) if s in SPLITS else 99):
        ps = [p for p in preds if p.split == split]
        m = processbench_metric([p.prediction for p in ps], [p.label for p in ps])
        conf = {"tp": 0, "fp": 0, "fn": 0, "tn": 0, "invalid": 0}
        probs, wrong = [], []
        for p in ps:
            truth = unit_labels(p.unit_steps, p.label)
            for key, v in detection_stats(p.verdicts, truth).items():
                conf[key] += v
            for q, t in zip(p.p_yes, truth, strict=True):
                if q is not None and t is not None:
                    probs.append(q)
                    wrong.append(t)
        units = sum(len(p.verdicts) for p in ps)
        out[split] = {**m, **precision_recall(conf), **conf, "units": units,
                      "invalid_units": sum(v is None for p in ps for v in p.verdicts),
                      "auroc": _auroc(probs, wrong)}
    if out:
        out["average_f1"] = float(np.mean([v["f1"] for v in out.values()]))
    return out


def run_processbench(
    scorer: SliceScorer,
    splits: Sequence[str] = SPLITS,
    limit: int | None = None,
    unit: Unit = "steps",
    root: str | Path | None = None,
    seed: int = 0,
) -> tuple[dict[str, Any], list[PBPrediction]]:
    """Load the splits, judge all their units in one backend call, and return (summary, predictions)."""
    examples = [ex for s in splits for ex in load_processbench(s, root, limit, seed)]
    preds = predict(examples, scorer, unit)
    return summarize(preds), preds


def predictions_to_rows(preds: Sequence[PBPrediction]) -> list[dict[str, Any]]:
    """Plain JSON rows of the predictions."""
    return [asdict(p) for p in preds]


def _pct(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}"


def format_table(summary: dict[str, Any]) -> str:
    """A markdown table: per split ProcessBench accuracies and F1 (in %), step-level P/R, AUROC, counts."""
    head = ("| split | n (err/ok) | acc. erroneous | acc. correct | F1 | NO precision | NO recall | AUROC | "
            "units | invalid |\n|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for split, m in summary.items():
        if not isinstance(m, dict):
            continue
        auroc = "n/a" if math.isnan(m["auroc"]) else f"{m['auroc']:.3f}"
        lines.append(f"| {split} | {m['n_error']}/{m['n_correct']} | {_pct(m['error_acc'])} | "
                     f"{_pct(m['correct_acc'])} | {_pct(m['f1'])} | {_pct(m['precision'])} | "
                     f"{_pct(m['recall'])} | {auroc} | {m['units']} | {m['invalid_units']} |")
    if "average_f1" in summary:
        lines.append(f"\nAverage F1 over splits: {_pct(summary['average_f1'])}")
    return "\n".join(lines)
