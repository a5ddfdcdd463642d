"""Resumable offline scoring jobs: groups in, one JSONL row per group out, safe to kill at any moment.

A job owns its output ``OUT`` through side files (``rewardkit.runtime.output``): ``OUT.manifest.json`` (what
produced the rows: scorer, options, judge spec, input path and SHA-256, rewardkit version; written
atomically before the first row), ``OUT.lock`` (an exclusive ``flock`` held while the job runs, so a second
job on the same ``OUT`` fails at once; removed when the job ends), ``OUT.rejects.jsonl`` (malformed input
records with ``--skip-bad``) and ``OUT.retry.jsonl`` (the journal of a ``--retry-failed`` run). What ``OUT``
may be is decided before anything is created beside it: a refused job leaves the folder as it was.

Rows are appended batch by batch with flush + fsync. On restart the manifest is compared first: a file
without one (not ours: empty, a device, a FIFO, a link) or with another job's is refused and left byte for
byte as it was. Only then is a half-written last line cut off; finished groups are skipped and the job
continues, so no row is lost or duplicated whatever the moment of the kill. ``retry_failed`` re-scores
the groups whose last row has an ``error``/``timeout`` response into the journal, never into ``OUT``;
the journal is merged into ``OUT`` by one atomic rename at the end (or by the next run after a kill), so
``OUT`` holds one row per group at every moment.

An input that is a pipe (``<(cmd)``, a FIFO) is read once into a private spool, hashed as it is read;
devices and sockets are refused.

Scoring goes through an executor: a function from an iterator of batches to an iterator of
``(batch, scores)`` in input order (``local_executor`` by default; a distributed one plugs in here).
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rewardkit.runtime.inputs import BadRecord, InputError, read_numbered, spool_stream
from rewardkit.runtime.output import (  # noqa: F401  (JobError, rejects_path, repair_jsonl, ... re-exported)
    JobError,
    JobOutput,
    OutputLock,
    dump_row,
    file_kind,
    input_digest,
    job_manifest,
    lock_path,
    manifest_path,
    rejects_path,
    repair_jsonl,
    retry_path,
    scorer_config,
)
from rewardkit.scoring import Scorer, reward_diversity
from rewardkit.types import Cost, Group, GroupScore, Status, lone_surrogate

FAILED = ("error", "timeout")  # statuses that --retry-failed re-scores
PIPE = "named pipe (FIFO)"  # an input that can be read once only (``<(cmd)``, a FIFO): spooled

Batch = list[Group]
Executor = Callable[[Iterator[Batch]], Iterator[tuple[Batch, list[GroupScore]]]]


@dataclass
class JobSummary:
    groups: int = 0  # rows in the output (this run and earlier ones)
    scored_now: int = 0
    skipped_done: int = 0
    retried: int = 0
    rejected: int = 0
    exceptions: int = 0  # groups whose scoring raised (their rows say error + the exception)
    first_exception: str | None = None
    statuses: Counter = field(default_factory=Counter)
    reward_mean: float | None = None
    non_diverse_fraction: float | None = None
    non_diverse_source: str | None = None  # "routed" (as the scorer decided) or "rewards"
    cost: Cost = field(default_factory=Cost)
    reasons: dict[str, Counter] = field(default_factory=dict)  # non-ok status -> its messages, counted

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {**d, "statuses": dict(self.statuses), "cost": self.cost.to_dict(),
                "reasons": {st: c.most_common(1)[0][0] for st, c in sorted(self.reasons.items())}}


# ------------------------------------------------------------------------------------ scoring


def _failure(g: Group, e: BaseException) -> GroupScore:
    """An ``error`` row for a group whose scoring raised: the exception type, message and raising line."""
    tb = traceback.extract_tb(e.__traceback__)
    where = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
    try:
        text = " ".join(str(e).split())[:500]
    except Exception as inner:  # a message that cannot be read must not take the job down
        text = f"(its message could not be read: {type(inner).__name__})"
    msg = f"{type(e).__name__}: {text}{where}"
    return GroupScore.failed(g.id, len(g), Status.ERROR, msg, extra={"exception": True})


def _check_scores(batch: Batch, scores: Any) -> list[GroupScore]:
    if not isinstance(scores, list) or len(scores) != len(batch):
        raise RuntimeError(f"scorer returned {len(scores) if isinstance(scores, list) else type(scores).__name__} "
                           f"scores for {len(batch)} groups")
    for g, s in zip(batch, scores):
        if not isinstance(s, GroupScore) or s.group_id != g.id or len(s.rewards) != len(g):
            raise RuntimeError(f"scorer returned a score that does not match group {g.id!r}")
    return scores


def score_batch(scorer: Scorer, batch: Batch) -> list[GroupScore]:
    """Score one batch so that no group can take the others down.

    Groups with text that is not valid Unicode are not sent (id/prompt/reference) or get that response
    marked ``error``; if the scorer raises on the batch, each group is scored alone and a group that
    still raises gets ``error`` rows carrying the exception.
    """
    pre: dict[int, GroupScore] = {}
    bad_resp: dict[int, dict[int, str]] = {}
    send: list[Group] = []
    for k, g in enumerate(batch):
        fields = {"id": g.id, "prompt": g.prompt, "reference": "\n".join(g.references), "expert": g.expert}
        bad = [(f, i) for f, v in fields.items() if (i := lone_surrogate(v)) is not None]
        if bad:
            f, i = bad[0]
            pre[k] = GroupScore.failed(g.id, len(g), Status.ERROR, f"field {f!r} is not valid Unicode text "
                                       f"(lone surrogate at character {i})")
            continue
        resp = {j: f"response is not valid Unicode text (lone surrogate at character {i})"
                for j, r in enumerate(g.responses) if (i := lone_surrogate(r)) is not None}
        if resp:
            bad_resp[k] = resp
            g = dataclasses.replace(g, responses=[r.encode("utf-8", "replace").decode("utf-8") if j in resp else r
                                                  for j, r in enumerate(g.responses)])
        send.append(g)
    try:
        scored = _check_scores(send, scorer.score(send)) if send else []
    except Exception as e:
        scored = [_failure(send[0], e)] if len(send) == 1 else [score_batch(scorer, [g])[0] for g in send]
    it = iter(scored)
    out = []
    for k in range(len(batch)):
        s = pre.get(k) or next(it)
        for j, msg in bad_resp.get(k, {}).items():
            s = _mark_error(s, j, msg)
        out.append(s)
    return out


def _mark_error(s: GroupScore, j: int, msg: str) -> GroupScore:
    rewards = s.rewards.copy()
    rewards[j] = np.nan
    statuses = list(s.statuses)
    statuses[j] = Status.ERROR
    messages = list(s.messages or [None] * len(statuses))
    messages[j] = msg
    return dataclasses.replace(s, rewards=rewards, statuses=statuses, messages=messages)


def local_executor(scorer: Scorer) -> Executor:
    """The default executor: score batches one after another in this process."""

    def run(batches: Iterator[Batch]) -> Iterator[tuple[Batch, list[GroupScore]]]:
        for batch in batches:
            yield batch, score_batch(scorer, batch)

    return run


def output_row(g: Group, s: GroupScore, scorer_name: str, with_texts: bool = False) -> dict[str, Any]:
    """The JSONL row of one group: id, the input's step (when it has one), scorer, rewards, statuses, ..., the
    input labels as ``correct``; ``with_texts`` adds the prompt, responses and reference (so a row stands alone)."""
    try:
        row = s.to_row()
        json.dumps(row, allow_nan=False)  # fail here, per group, rather than at write time
    except (TypeError, ValueError, RecursionError) as e:
        row = _failure(g, e).to_row()
    step = g.metadata.get("step")
    row = {"id": g.id, **({"step": step} if step is not None else {}), "scorer": scorer_name,
           **{k: v for k, v in row.items() if k != "id"}}
    if g.labels is not None:
        row.setdefault("correct", list(g.labels))
    if with_texts:
        ref = g.reference
        row.update(prompt=g.prompt, responses=list(g.responses), reference=list(ref) if isinstance(ref, tuple) else ref)
    return row


def load_groups(path: str | Path, *, skip_bad: bool = False, group_key: str | None = None,
                fmt: str | None = None, limit: int | None = None, source: str | Path | None = None,
                fields: dict[str, str] | None = None) -> tuple[list[Group], list[BadRecord]]:
    """All groups of an input (up to ``limit``) and the rejected records (a duplicate id among them, naming
    both lines, with ``skip_bad``). ``source``: see ``read_groups``."""
    limit = None if limit is None else positive_int("--limit", limit)  # 0 or -1 read one group
    groups: list[Group] = []
    bad: list[BadRecord] = []
    for _, item in read_numbered(path, skip_bad=skip_bad, group_key=group_key, fmt=fmt, source=source,
                                 fields=fields):
        if isinstance(item, BadRecord):
            bad.append(item)
            continue
        groups.append(item)
        if limit is not None and len(groups) >= limit:
            break
    return groups, bad


def _failed(row: dict) -> bool:
    return any(s in FAILED for s in row.get("statuses", ()))


def positive_int(flag: str, value: int | str) -> int:
    """``value`` (an int, or its text from a command line) as a positive integer, else a ``JobError``
    naming ``flag``: the one check of a job's ``--batch-size`` and ``--limit``."""
    if isinstance(value, str):
        try:
            value = int(value.strip(), 10)
        except ValueError:
            raise JobError(f"{flag} must be a positive integer, got {value}") from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise JobError(f"{flag} must be a positive integer, got {value}")
    return value


def score_file(inp: str | Path, scorer: Scorer, out: str | Path, *, batch_size: int = 16,
               skip_bad: bool = False, group_key: str | None = None, fmt: str | None = None,
               limit: int | None = None, restart: bool = False, retry_failed: bool = False,
               options: dict[str, Any] | None = None, executor: Executor | None = None,
               on_start: Callable[[int, int], None] | None = None,
               on_batch: Callable[[int], None] | None = None,
               on_mkdir: Callable[[Path], None] | None = None,
               fields: dict[str, str] | None = None, with_texts: bool = False) -> JobSummary:
    """Score every group of ``inp`` into ``out`` (JSONL), resuming if ``out`` already has this job's rows.

    Everything that can refuse the job (the input, ``out`` and its side files, the lock, the records) is
    checked before anything is created beside ``out``: a refused job leaves its folder as it was. ``out`` is
    owned by a ``JobOutput`` (its rules: ``rewardkit.runtime.output``); a path that names a folder (``x/``)
    is refused. Missing folders above ``out`` are created (``on_mkdir(topmost)`` is told, once) and removed
    again if the job then fails before writing. ``OUT.lock`` is removed when the job ends.

    ``options``: the options the scorer was built with, for the manifest when it has no ``options``
    dataclass. ``executor``: see the module docstring. ``on_start(total, already_done)`` and
    ``on_batch(n_groups)`` drive a progress display. ``fields``: the input's own column names (see
    ``rewardkit.runtime.inputs.FIELD_NAMES``); ``with_texts``: rows carry the prompt, responses and reference.
    """
    batch_size = positive_int("--batch-size", batch_size)
    limit = None if limit is None else positive_int("--limit", limit)
    inp = Path(inp)
    kind = file_kind(inp, follow=True)
    if kind is None:
        raise FileNotFoundError(f"{inp}: no such file or directory")
    if kind not in ("regular file", "directory", PIPE):
        raise JobError(f"{inp}: is a {kind}, not a file of rows; save them to a file and score that")
    name = getattr(scorer, "name", type(scorer).__name__)
    state = {"scoring": False}
    kw = dict(batch_size=batch_size, skip_bad=skip_bad, group_key=group_key, fmt=fmt, limit=limit, restart=restart,
              retry_failed=retry_failed, options=options, executor=executor, on_start=on_start, on_batch=on_batch,
              fields=fields, with_texts=with_texts)
    try:
        if kind != PIPE:
            return _run_job(inp, scorer, out, name, state, on_mkdir=on_mkdir, **kw)
        JobOutput(out, {}, inp=inp).check_path()  # before the pipe is read
        with tempfile.TemporaryDirectory(prefix="rewardkit-input-") as d:  # a pipe is read once: spool it
            spooled = Path(d) / "rows"
            return _run_job(inp, scorer, out, name, state, source=(spooled, spool_stream(inp, spooled)),
                            on_mkdir=on_mkdir, **kw)
    except OSError as e:  # unwritable folder, full disk, ...: one clear line, finished rows stay
        hint = "; rows written so far are kept, re-run to resume" if state["scoring"] else ""
        raise JobError(f"{e.filename or out}: {e.strerror or e}{hint}") from None


def _run_job(inp: Path, scorer: Scorer, out: str | Path, name: str, state: dict, *, batch_size: int,
             skip_bad: bool, group_key: str | None, fmt: str | None, limit: int | None, restart: bool,
             retry_failed: bool, options: dict[str, Any] | None, executor: Executor | None,
             on_start: Callable[[int, int], None] | None, on_batch: Callable[[int], None] | None,
             on_mkdir: Callable[[Path], None] | None, source: tuple[Path, str] | None = None,
             fields: dict[str, str] | None = None, with_texts: bool = False) -> JobSummary:
    """Claim the output, read the records, then the job under the output's lock. ``source``: (spooled copy,
    SHA-256) of an input that was a pipe."""
    manifest = job_manifest(scorer, inp, options=options, fmt=fmt, group_key=group_key,
                            digest=source[1] if source else None, fields=fields, with_texts=with_texts)
    output = JobOutput(out, manifest, restart=restart, inp=inp).claim()  # refuses, creating nothing
    groups, bad = load_groups(inp, skip_bad=skip_bad, group_key=group_key, fmt=fmt, limit=limit,
                              source=source[0] if source else None, fields=fields)
    if not groups:
        if bad:
            what = f"all {len(bad)} records were rejected (the first: {InputError(*_where(bad[0]))})"
        else:
            what = "it holds no records" + (" (a pipe: was its writer open?)" if source else "")
        raise JobError(f"{inp}: no groups to score: {what}")
    with output.open(on_mkdir):
        return _score_groups(groups, bad, scorer, output, name, state, batch_size=batch_size,
                             retry_failed=retry_failed, executor=executor, on_start=on_start, on_batch=on_batch,
                             with_texts=with_texts)


def _score_groups(groups: list[Group], bad: list[BadRecord], scorer: Scorer, output: JobOutput, name: str,
                  state: dict, *, batch_size: int, retry_failed: bool, executor: Executor | None,
                  on_start: Callable[[int, int], None] | None,
                  on_batch: Callable[[int], None] | None, with_texts: bool = False) -> JobSummary:
    """Append the rows of the groups not yet done (under the lock, the manifest written)."""
    last = output.done()
    if bad:
        output.reject(b.to_row() for b in bad)
    retry = {gid for gid, r in last.items() if _failed(r)} if retry_failed else set()
    todo = [g for g in groups if g.id not in last or g.id in retry]
    if on_start:
        on_start(len(groups), len(groups) - len(todo))
    summary = JobSummary(skipped_done=len(groups) - len(todo), retried=len(retry & {g.id for g in todo}),
                         rejected=len(bad))
    batches = (todo[i:i + batch_size] for i in range(0, len(todo), batch_size))
    run = executor or local_executor(scorer)
    state["scoring"] = True
    expected = iter(range(0, len(todo), batch_size))
    for batch, scores in run(batches):
        i = next(expected, None)
        if i is None or [g.id for g in batch] != [g.id for g in todo[i:i + batch_size]]:
            raise RuntimeError("executor returned batches out of input order")
        new = [output_row(g, s, name, with_texts) for g, s in zip(batch, _check_scores(batch, scores))]
        for g, r in zip(batch, new):
            if r.get("exception"):
                summary.exceptions += 1
                summary.first_exception = summary.first_exception or f"group {g.id!r}: {r['messages'][0]}"
        output.append(new, journal=bool(retry))  # a retry never appends to OUT: its rows go to the journal
        summary.scored_now += len(batch)
        if on_batch:
            on_batch(len(batch))
    if next(expected, None) is not None:
        raise RuntimeError("executor stopped before the last batch")
    return summarize(output.merge([g.id for g in groups]), summary)


def _where(b: BadRecord) -> tuple[str, int | None, str | None, str]:
    return b.path, b.line, b.field, b.message


# ------------------------------------------------------------------------------------ summary


def _routed(row: dict) -> bool | None:
    """Whether the scorer routed this group as non-diverse, as it decided it (None if it does not route)."""
    for place in (row.get("stats"), row.get("components"), row):  # per-group numbers live in "stats"
        if isinstance(place, dict) and isinstance(place.get("routed"), bool):
            return place["routed"]
    return None


def summarize(rows: list[dict], summary: JobSummary | None = None) -> JobSummary:
    """Status counts, mean reward over ok responses, non-diverse fraction and total cost of output rows.

    The non-diverse fraction is the scorer's own routing decision where it records one (``routed``);
    otherwise the fraction of groups whose ok rewards are all equal (Reasoning Arena eq. 3).
    """
    s = summary or JobSummary()
    s.groups = len(rows)
    rewards, nd, routed = [], 0, []
    for r in rows:
        s.statuses.update(r.get("statuses", []))
        for st, m in zip(r.get("statuses", []), r.get("messages") or [], strict=False):
            if st != "ok" and m:
                s.reasons.setdefault(st, Counter())[m] += 1
        vals = np.array([x for x in r.get("rewards", []) if x is not None], dtype=float)
        rewards.extend(vals.tolist())
        if len(vals) and not reward_diversity(vals)[0]:
            nd += 1
        routed.append(_routed(r))
        s.cost += Cost(**{k: v for k, v in (r.get("cost") or {}).items() if k in Cost.__dataclass_fields__})
    s.reward_mean = float(np.mean(rewards)) if rewards else None
    if rows and all(x is not None for x in routed):
        s.non_diverse_fraction, s.non_diverse_source = sum(routed) / len(rows), "routed"
    else:
        s.non_diverse_fraction, s.non_diverse_source = (nd / len(rows) if rows else None), "rewards"
    return s
