"""Resumable offline scoring jobs: groups in, one JSONL row per group out, safe to kill at any moment.

Rows are appended batch by batch with flush + fsync. On restart the output is repaired (a half-written
last line is cut off), finished group ids are skipped, and the job continues, so no row is lost or
duplicated whatever the moment of the kill.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rewardkit.io import BadRecord, InputError, read_groups
from rewardkit.scoring import Scorer, reward_diversity
from rewardkit.types import Cost, Group


@dataclass
class JobSummary:
    groups: int = 0  # rows in the output (this run and earlier ones)
    scored_now: int = 0
    skipped_done: int = 0
    rejected: int = 0
    statuses: Counter = field(default_factory=Counter)
    reward_mean: float | None = None
    non_diverse_fraction: float | None = None
    cost: Cost = field(default_factory=Cost)

    def to_dict(self) -> dict[str, Any]:
        return {"groups": self.groups, "scored_now": self.scored_now, "skipped_done": self.skipped_done,
                "rejected": self.rejected, "statuses": dict(self.statuses), "reward_mean": self.reward_mean,
                "non_diverse_fraction": self.non_diverse_fraction, "cost": self.cost.to_dict()}


def rejects_path(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".rejects.jsonl")


def repair_jsonl(path: Path) -> list[dict]:
    """Cut a half-written last line off ``path`` (in place) and return the complete rows."""
    if not path.exists():
        return []
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end < len(data):
        with open(path, "r+b") as f:
            f.truncate(end)
            f.flush()
            os.fsync(f.fileno())
    rows = []
    for n, line in enumerate(data[:end].splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise InputError(path, n, None, f"existing output line is corrupt ({e.msg}); move the file away to start over") from None
    return rows


def _append(path: Path, rows: Iterable[dict]) -> None:
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
    if not data:
        return
    with open(path, "ab") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def load_groups(path: str | Path, *, skip_bad: bool = False, group_key: str | None = None,
                fmt: str | None = None, limit: int | None = None) -> tuple[list[Group], list[BadRecord]]:
    """All groups of an input (up to ``limit``) and the rejected records; duplicate ids are an error."""
    groups: list[Group] = []
    bad: list[BadRecord] = []
    seen: set[str] = set()
    for item in read_groups(path, skip_bad=skip_bad, group_key=group_key, fmt=fmt):
        if isinstance(item, BadRecord):
            bad.append(item)
            continue
        if item.id in seen:
            e = InputError(path, None, "id", f"duplicate group id {item.id!r}")
            if not skip_bad:
                raise e
            bad.append(BadRecord(str(path), None, "id", e.detail))
            continue
        seen.add(item.id)
        groups.append(item)
        if limit is not None and len(groups) >= limit:
            break
    return groups, bad


def score_file(inp: str | Path, scorer: Scorer, out: str | Path, *, batch_size: int = 16,
               skip_bad: bool = False, group_key: str | None = None, fmt: str | None = None,
               limit: int | None = None,
               on_start: Callable[[int, int], None] | None = None,
               on_batch: Callable[[int], None] | None = None) -> JobSummary:
    """Score every group of ``inp`` into ``out`` (JSONL), resuming if ``out`` already has rows.

    ``on_start(total, already_done)`` and ``on_batch(n_groups)`` drive a progress display.
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done_rows = repair_jsonl(out)
    done = {r["id"] for r in done_rows}
    groups, bad = load_groups(inp, skip_bad=skip_bad, group_key=group_key, fmt=fmt, limit=limit)
    if bad:
        rp = rejects_path(out)
        known = {(r.get("path"), r.get("line"), r.get("field")) for r in repair_jsonl(rp)}
        _append(rp, [b.to_row() for b in bad if (b.path, b.line, b.field) not in known])
    todo = [g for g in groups if g.id not in done]
    if on_start:
        on_start(len(groups), len(groups) - len(todo))
    summary = JobSummary(skipped_done=len(groups) - len(todo), rejected=len(bad))
    for i in range(0, len(todo), batch_size):
        batch = todo[i:i + batch_size]
        scores = scorer.score(batch)
        _append(out, [s.to_row() for s in scores])
        summary.scored_now += len(batch)
        if on_batch:
            on_batch(len(batch))
    return summarize(repair_jsonl(out), summary)


def summarize(rows: list[dict], summary: JobSummary | None = None) -> JobSummary:
    """Status counts, mean reward over ok responses, non-diverse fraction and total cost of output rows."""
    s = summary or JobSummary()
    s.groups = len(rows)
    rewards, nd = [], 0
    for r in rows:
        s.statuses.update(r["statuses"])
        vals = np.array([x for x in r["rewards"] if x is not None], dtype=float)
        rewards.extend(vals.tolist())
        if len(vals) and not reward_diversity(vals)[0]:
            nd += 1
        s.cost += Cost(**{k: v for k, v in r.get("cost", {}).items() if k in Cost.__dataclass_fields__})
    s.reward_mean = float(np.mean(rewards)) if rewards else None
    s.non_diverse_fraction = nd / len(rows) if rows else None
    return s
