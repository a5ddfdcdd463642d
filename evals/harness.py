"""The evaluation harness: rollouts in, graded with labels or the verifier, scored by any scorer (resumably,
through ``rewardkit.runtime.jobs``), out as metric reports (pass@k / avg@k / maj@k, scorer-as-verifier, best-of-N,
AUC, length bias, cost) written as Markdown + JSON (+ PNG).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from rewardkit.evals.metrics import (
    auc,
    avg_at_k,
    best_of_n,
    best_of_n_curve,
    cost_per_response,
    length_bias,
    maj_at_k,
    pass_at_k_groups,
    powers_of_two,
    verifier_metrics,
    within_group_auc,
)

from rewardkit.types import Group

Grading = Literal["auto", "labels", "verifier"]


class EvalError(ValueError):
    """A request the harness cannot answer (missing labels, k > n, unknown scorer), with the reason."""


# ------------------------------------------------------------------------------------------ inputs


def load_rollouts(path: str | Path, *, limit: int | None = None, ids: Sequence[str] | None = None,
                  fields: dict[str, str] | None = None) -> list[Group]:
    """Groups of a rollouts file (any format ``rewardkit score`` reads), optionally only ``ids`` (in order);
    ``fields``: the file's own column names (``--field``, see ``rewardkit.runtime.inputs.FIELD_NAMES``)."""
    from rewardkit.runtime.jobs import load_groups

    groups, _ = load_groups(path, limit=None if ids else limit, fields=fields)
    if ids is not None:
        by_id = {g.id: g for g in groups}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise EvalError(f"{path}: group id(s) {missing[:3]} not found")
        groups = [by_id[i] for i in ids]
    if not groups:
        raise EvalError(f"{path}: no groups")
    return groups


def write_rollouts(groups: Sequence[Group], path: Path) -> Path:
    """Write groups as grouped JSONL (the shape ``rewardkit score`` reads)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for g in groups:
            row = {"id": g.id, "problem": g.prompt, "answer": g.reference, "solution": g.expert,
                   "responses": g.responses}
            if g.labels is not None:
                row["correct"] = list(g.labels)
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def labels_of(groups: Sequence[Group], what: str) -> list[np.ndarray]:
    """The rows' correctness labels; a clear error naming the first group without them."""
    missing = [g.id for g in groups if g.labels is None]
    if missing:
        raise EvalError(f"{what} needs correctness labels ('correct' per response) but group {missing[0]!r} "
                        f"and {len(missing) - 1} other(s) have none")
    return [np.asarray(g.labels, dtype=bool) for g in groups]


def grade(groups: Sequence[Group], by: Grading = "auto") -> tuple[list[np.ndarray], str, int]:
    """Correctness per response: the rows' labels, or the answer verifier against each group's reference.

    ``auto`` uses labels when every group has them, else the verifier. A verifier check that times out or
    fails counts as incorrect and is counted in the third return value. Returns (correct, how, failed).
    """
    if by == "labels" or (by == "auto" and all(g.labels is not None for g in groups)):
        return labels_of(groups, "grading by labels"), "labels", 0
    if by not in ("auto", "verifier"):
        raise EvalError(f"unknown grading {by!r}; use auto, labels or verifier")
    from rewardkit.scoring import get_scorer

    code = [is_code(g) for g in groups]
    if any(code) and not all(code):
        raise EvalError("the rollouts mix code and math groups; grade them separately")
    no_ref = [g.id for g in groups if not g.reference]
    if not code[0] and no_ref:
        raise EvalError(f"grading with the verifier needs a reference answer, group {no_ref[0]!r} has none")
    scores = get_scorer("code" if code[0] else "verifier").score(list(groups))
    correct = [np.nan_to_num(s.rewards, nan=0.0) >= 1.0 for s in scores]
    failed = sum(int((~s.mask).sum()) for s in scores)
    return correct, "code verifier" if code[0] else "verifier", failed


def is_code(g: Group) -> bool:
    """A code group: generated from a code benchmark, or carrying HumanEval / LiveCodeBench tests."""
    m = g.metadata
    return m.get("kind") == "code" or "entry_point" in m or "public_test_cases" in m or "input_output" in m


def _check_n(correct: Sequence[np.ndarray], ks: Sequence[int] | None) -> tuple[int, list[int]]:
    sizes = {len(c) for c in correct}
    n = min(sizes)
    ks = list(ks) if ks else powers_of_two(n)
    too_big = [k for k in ks if k > n]
    if too_big:
        raise EvalError(f"k={too_big[0]} is larger than n={n} responses per group")
    return n, ks


# ---------------------------------------------------------------------------------------- accuracy


def accuracy_report(groups: Sequence[Group], *, by: Grading = "auto", ks: Sequence[int] | None = None,
                    checker: Any = None) -> dict[str, Any]:
    """pass@k, avg@k and maj@k for every k (default: each power of 2 up to n)."""
    from rewardkit.answers import extract_answer

    correct, how, failed = grade(groups, by)
    n, ks = _check_n(correct, ks)
    code = any(is_code(g) for g in groups)  # programs have no final answer to vote on: no maj@k
    answers = None if code else [[extract_answer(r) for r in g.responses] for g in groups]
    rows = [{"k": k, "pass@k": pass_at_k_groups(correct, k), "avg@k": avg_at_k(correct, k),
             "maj@k": None if answers is None else maj_at_k(answers, correct, k, checker=checker)} for k in ks]
    return {"groups": len(groups), "n": n, "graded_by": how, "grading_failures": failed, "table": rows}


def accuracy_markdown(rep: dict[str, Any], title: str) -> str:
    lines = [f"# {title}", "", f"{rep['groups']} problems x {rep['n']} samples, graded by {rep['graded_by']}"
             + (f" ({rep['grading_failures']} verifier failures counted as wrong)" if rep["grading_failures"] else "")
             + ".", "", "| k | pass@k | avg@k | maj@k |", "|---|---|---|---|"]
    lines += [f"| {r['k']} | {100 * r['pass@k']:.1f} | {100 * r['avg@k']:.1f} | "
              f"{'-' if r['maj@k'] is None else format(100 * r['maj@k'], '.1f')} |" for r in rep["table"]]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------ scorers


@dataclass
class ScoredRun:
    """A scorer's rows for a list of groups (same order) and the scores file they came from."""

    scorer: str
    rows: list[dict[str, Any]]
    path: Path


def score_groups(groups: Sequence[Group], scorer: str, out_dir: Path, *, options: dict[str, Any] | None = None,
                 batch_size: int = 8, tag: str | None = None, restart: bool = False, on_start=None,
                 on_batch=None) -> ScoredRun:
    """Score the groups with a registered scorer into ``out_dir/<tag or scorer>.scores.jsonl`` through
    ``rewardkit.runtime.jobs.score_file`` (resumable: a re-run skips finished groups; ``restart`` discards
    the file's rows first)."""
    from rewardkit.runtime.jobs import JobError, repair_jsonl, score_file
    from rewardkit.runtime.pacing import paced_executor
    from rewardkit.scoring import get_scorer

    try:
        sc = get_scorer(scorer, **(options or {}))
    except KeyError as e:
        raise EvalError(str(e).strip("'\"")) from None
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = tag or scorer
    inp = write_rollouts(groups, out_dir / f"{stem}.input.jsonl")
    out = out_dir / f"{stem}.scores.jsonl"
    try:
        # progress as groups finish (sub-batches of a few seconds), not once per batch
        executor = None if on_batch is None else paced_executor(sc, on_batch)
        score_file(inp, sc, out, batch_size=batch_size, options=options, restart=restart, executor=executor,
                   on_start=on_start)
    except JobError as e:
        raise EvalError(f"scoring with {scorer!r}: {e}") from None
    return ScoredRun(scorer, align_rows(groups, repair_jsonl(out), out), out)


def align_rows(groups: Sequence[Group], rows: Sequence[dict[str, Any]], where: Any = "scores") -> list[dict[str, Any]]:
    """Score rows in the groups' order; a clear error when a group has no row or sizes disagree."""
    by_id = {r["id"]: r for r in rows}
    out = []
    for g in groups:
        r = by_id.get(g.id)
        if r is None:
            raise EvalError(f"{where}: no score row for group {g.id!r}")
        if len(r["rewards"]) != len(g):
            raise EvalError(f"{where}: group {g.id!r} has {len(r['rewards'])} rewards for {len(g)} responses")
        out.append(r)
    return out


def _rewards(rows: Sequence[dict[str, Any]]) -> list[np.ndarray]:
    return [np.array([np.nan if x is None else x for x in r["rewards"]], dtype=np.float64) for r in rows]


def is_binary(rewards: Sequence[np.ndarray]) -> bool:
    """Do the rewards take only the values 0 and 1 (a verifier-like scorer)?"""
    vals = np.concatenate(rewards) if rewards else np.zeros(0)
    vals = vals[np.isfinite(vals)]
    return bool(len(vals)) and bool(np.isin(vals, (0.0, 1.0)).all())


def scorer_report(groups: Sequence[Group], run: ScoredRun, *, correct: Sequence[np.ndarray] | None = None,
                  n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Every per-scorer number: verifier P/R/F1 (binary rewards only), best-of-N, AUC, length bias, the
    fraction of groups with a non-zero advantage, masked responses and cost."""
    from rewardkit.scoring import reward_diversity

    correct = list(correct) if correct is not None else labels_of(groups, f"evaluating {run.scorer}")
    rewards = _rewards(run.rows)
    n = min(len(c) for c in correct)
    lengths = [[len(r) for r in g.responses] for g in groups]
    responses = sum(len(g) for g in groups)
    acc, empty = best_of_n(rewards, correct, n)
    wauc, mixed = within_group_auc(rewards, correct)
    diverse = [bool(reward_diversity(r[np.isfinite(r)])[0]) if np.isfinite(r).any() else False for r in rewards]
    statuses: dict[str, int] = {}
    for r in run.rows:
        for s in r["statuses"]:
            statuses[s] = statuses.get(s, 0) + 1
    rep: dict[str, Any] = {
        "scorer": run.scorer, "groups": len(groups), "n": n, "responses": responses,
        "binary": is_binary(rewards),
        "verifier": None,
        f"best_of_{n}": acc, "best_of_n_curve": best_of_n_curve(rewards, correct),
        "no_selectable_response": empty,
        "auc": auc(rewards, correct), "within_group_auc": wauc, "mixed_groups": mixed,
        "length_bias": length_bias(rewards, lengths, correct),
        "nonzero_advantage_groups": float(np.mean(diverse)),
        "statuses": statuses,
        "cost": cost_per_response([r.get("cost", {}) for r in run.rows], responses),
        "scores_file": str(run.path),
    }
    if rep["binary"]:
        rep["verifier"] = verifier_metrics(rewards, correct, n_boot=n_boot, seed=seed).to_dict()
    return rep


def cell(x: float | None, fmt: str = ".3f") -> str:
    """A table cell: ``x`` formatted, or ``-`` when there is no value."""
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def _iv(d: dict[str, float] | None) -> str:
    if d is None or math.isnan(d["value"]):
        return "-"
    return f"{d['value']:.3f} [{d['low']:.3f}, {d['high']:.3f}]"


def verifier_markdown(reps: Sequence[dict[str, Any]], title: str) -> str:
    lines = [f"# {title}", "", "A scorer as a verifier: reward >= 0.5 predicts `correct`. 95% intervals: seeded "
             "bootstrap over groups (1,000 resamples).", "",
             "| scorer | groups | precision | recall | F1 | accuracy | TP/FP/FN/TN | masked |", "|---|---|---|---|---|---|---|---|"]
    for r in reps:
        v = r["verifier"]
        if v is None:
            lines.append(f"| {r['scorer']} | {r['groups']} | graded rewards, not a verifier | | | | | |")
            continue
        lines.append(f"| {r['scorer']} | {r['groups']} | {_iv(v['precision'])} | {_iv(v['recall'])} | {_iv(v['f1'])} | "
                     f"{_iv(v['accuracy'])} | {v['tp']}/{v['fp']}/{v['fn']}/{v['tn']} | {v['masked']} |")
    return "\n".join(lines) + "\n"


def select_markdown(reps: Sequence[dict[str, Any]], title: str, baseline: dict[str, float] | None = None) -> str:
    n = reps[0]["n"] if reps else 0
    lines = [f"# {title}", ""]
    if baseline:
        lines += [f"Reference points: random choice (mean accuracy) {100 * baseline['random']:.1f}%, "
                  f"oracle (pass@{n}) {100 * baseline['oracle']:.1f}%. The curves in select.png (`curves` in "
                  "select.json) are expected over random subsets of n responses, as pass@n is.", ""]
    lines += [f"| scorer | groups | best-of-{n} (%) | AUC | within-group AUC (mixed groups) | length bias (Spearman) | "
              "non-zero-advantage groups |", "|---|---|---|---|---|---|---|"]
    for r in reps:
        lines.append(f"| {r['scorer']} | {r['groups']} | {100 * r[f'best_of_{n}']:.1f} | {cell(r['auc'])} | "
                     f"{cell(r['within_group_auc'])} ({r['mixed_groups']}) | {cell(r['length_bias']['spearman'])} | "
                     f"{100 * r['nonzero_advantage_groups']:.0f}% |")
    return "\n".join(lines) + "\n"


def selection_baselines(correct: Sequence[np.ndarray]) -> dict[str, float]:
    """Random choice (expected accuracy = mean label) and the oracle (pass@n) for a best-of-N plot."""
    n = min(len(c) for c in correct)
    return {"random": float(np.mean([c[:n].mean() for c in correct])), "oracle": pass_at_k_groups([c[:n] for c in correct], n)}


def selection_curves(reps: Sequence[dict[str, Any]], correct: Sequence[np.ndarray]) -> dict[str, list[float]]:
    """The best-of-n curves a plot draws, all expected over random n-subsets of each group's responses: the
    oracle (unbiased pass@n), random choice (the mean label at every n) and each scorer's
    ``best_of_n_curve``, so no selector is drawn above the oracle and n = N reads as select.md states."""
    n = min(len(c) for c in correct)
    xs = list(range(1, n + 1))
    random = selection_baselines(correct)["random"]
    curves = {"n": xs, "oracle (pass@n)": [pass_at_k_groups([c[:n] for c in correct], k) for k in xs],
              "random choice": [random] * n}
    for r in reps:
        curve = {int(k): v for k, v in r["best_of_n_curve"].items()}
        curves[r["scorer"]] = [curve[k] for k in xs]
    return curves


def plot_best_of_n(curves: dict[str, list[float]], path: Path, title: str) -> Path:
    """Draw ``selection_curves``: each scorer's best-of-n accuracy with random choice and the oracle."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = curves["n"]
    fig, ax = plt.subplots(figsize=(6, 4))
    # the references on top: a selector that equals the oracle must not hide it
    ax.plot(xs, [100 * v for v in curves["oracle (pass@n)"]], "k--", label="oracle (pass@n)", zorder=5)
    ax.plot(xs, [100 * v for v in curves["random choice"]], "k:", label="random choice", zorder=5)
    for name, ys in curves.items():
        if name not in ("n", "oracle (pass@n)", "random choice"):
            ax.plot(xs, [100 * v for v in ys], marker="o", ms=3, label=name)
    ax.set_xlabel("n (responses to choose from; expected over random subsets of n)")
    ax.set_ylabel("accuracy of the chosen response (%)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})  # no version stamp: stable bytes
    plt.close(fig)
    return path


def write_report(out_dir: Path, stem: str, data: dict[str, Any], markdown: str) -> tuple[Path, Path]:
    """``stem.json`` and ``stem.md`` in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    j, m = out_dir / f"{stem}.json", out_dir / f"{stem}.md"
    j.write_text(json.dumps(data, indent=2, default=str) + "\n")
    m.write_text(markdown.rstrip() + "\n")
    return j, m
