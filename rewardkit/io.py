"""Reading groups from files: grouped JSONL, one-response-per-line JSONL, Parquet, saved HF datasets.

Every malformed record raises ``InputError`` naming file, line (or row) and field, or, with
``skip_bad=True``, comes out as a ``BadRecord`` so a job can log it and keep going.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardkit.types import Group

PROMPT_KEYS = ("prompt", "problem", "question", "query")
REFERENCE_KEYS = ("reference", "answer", "gt", "ground_truth")
EXPERT_KEYS = ("expert", "solution", "expert_answer")
LABEL_KEYS = ("labels", "correct")
RESPONSE_LIST_KEYS = ("responses", "completions")
RESPONSE_KEYS = ("response", "completion")
GROUP_KEYS = ("group_id", "prompt_id", "uid")


class InputError(ValueError):
    """A malformed input record: ``path:line: field 'x': what is wrong``."""

    def __init__(self, path: str | Path, line: int | None, field: str | None, message: str):
        self.path, self.line, self.field, self.detail = str(path), line, field, message
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: " + (f"field {field!r}: " if field else "") + message)


@dataclass
class BadRecord:
    path: str
    line: int | None
    field: str | None
    message: str
    raw: str | None = None

    def to_row(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "field": self.field, "error": self.message, "raw": self.raw}


def read_groups(path: str | Path, *, skip_bad: bool = False, group_key: str | None = None,
                fmt: str | None = None) -> Iterator[Group | BadRecord]:
    """Yield the groups of a file or dataset directory in order (``BadRecord`` for rejects if ``skip_bad``).

    ``fmt``: ``grouped`` (one group per line, ``responses`` list), ``flat`` (one response per line with a
    group key), or None to detect from the first record. Parquet and saved HF datasets take either shape.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file or directory")
    if p.is_dir():
        records = _dataset_records(p)
    elif p.suffix == ".parquet":
        records = _parquet_records(p)
    else:
        records = _jsonl_records(p)
    yield from _to_groups(p, records, skip_bad=skip_bad, group_key=group_key, fmt=fmt)


def _jsonl_records(p: Path) -> Iterator[tuple[int, dict | BadRecord]]:
    with open(p, "rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                yield n, BadRecord(str(p), n, None, f"not valid UTF-8 (byte {e.start} of the line: {raw[e.start:e.start + 1]!r})",
                                   raw.decode("utf-8", "replace")[:500])
                continue
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as e:
                yield n, BadRecord(str(p), n, None, f"malformed JSON ({e.msg} at column {e.colno})", text[:500])
                continue
            if not isinstance(obj, dict):
                yield n, BadRecord(str(p), n, None, f"expected a JSON object, got {type(obj).__name__}", text[:500])
                continue
            yield n, obj


def _parquet_records(p: Path) -> Iterator[tuple[int, dict | BadRecord]]:
    import pyarrow.parquet as pq

    table = pq.read_table(p)
    yield from enumerate(table.to_pylist(), 1)


def _dataset_records(p: Path) -> Iterator[tuple[int, dict | BadRecord]]:
    from datasets import load_from_disk

    ds = load_from_disk(str(p))
    if hasattr(ds, "keys"):  # a DatasetDict: take the only split, or refuse to guess
        splits = list(ds.keys())
        if len(splits) != 1:
            raise InputError(p, None, None, f"dataset has splits {splits}; pass the folder of one split")
        ds = ds[splits[0]]
    yield from enumerate(ds, 1)


def _first(obj: dict, keys: tuple[str, ...]) -> tuple[str | None, Any]:
    for k in keys:
        if k in obj and obj[k] is not None:
            return k, obj[k]
    return None, None


def _check_str(path: Path, n: int, field: str, v: Any) -> str:
    if not isinstance(v, str):
        raise InputError(path, n, field, f"expected a string, got {type(v).__name__}")
    return v


def _labels(path: Path, n: int, field: str, v: Any, size: int) -> list[bool]:
    if not isinstance(v, list) or not all(isinstance(x, (bool, int)) and x in (0, 1) for x in v):
        raise InputError(path, n, field, "expected a list of booleans")
    if len(v) != size:
        raise InputError(path, n, field, f"{len(v)} labels for {size} responses")
    return [bool(x) for x in v]


def parse_grouped(path: Path, n: int, obj: dict) -> Group:
    """One grouped record (``problem``/``prompt``, ``responses``, optional ``answer``, ``solution``, ``correct``)."""
    rkey, responses = _first(obj, RESPONSE_LIST_KEYS)
    if rkey is None:
        raise InputError(path, n, "responses", "missing (expected a list of response strings)")
    if not isinstance(responses, list):
        raise InputError(path, n, rkey, f"expected a list, got {type(responses).__name__}")
    if not responses:
        raise InputError(path, n, rkey, "empty response list")
    for i, r in enumerate(responses):
        if not isinstance(r, str):
            raise InputError(path, n, f"{rkey}[{i}]", f"expected a string, got {type(r).__name__}")
    pkey, prompt = _first(obj, PROMPT_KEYS)
    if pkey is None:
        raise InputError(path, n, "prompt", f"missing (looked for {', '.join(PROMPT_KEYS)})")
    prompt = _check_str(path, n, pkey, prompt)
    fkey, ref = _first(obj, REFERENCE_KEYS)
    ref = None if fkey is None else _check_str(path, n, fkey, str(ref) if isinstance(ref, (int, float)) else ref)
    ekey, expert = _first(obj, EXPERT_KEYS)
    expert = None if ekey is None else _check_str(path, n, ekey, expert)
    lkey, labels = _first(obj, LABEL_KEYS)
    labels = None if lkey is None else _labels(path, n, lkey, labels, len(responses))
    gid = obj.get("id", f"{path.stem}-{n}")
    used = {rkey, pkey, fkey, ekey, lkey, "id"}
    meta = {k: v for k, v in obj.items() if k not in used}
    return Group(str(gid), prompt, list(responses), ref, expert, labels, meta)


def _to_groups(path: Path, records: Iterator[tuple[int, dict | BadRecord]], *, skip_bad: bool,
               group_key: str | None, fmt: str | None) -> Iterator[Group | BadRecord]:
    flat: dict[str, dict[str, Any]] = {}  # group key -> accumulated group (flat format)
    for n, obj in records:
        if isinstance(obj, BadRecord):
            if skip_bad:
                yield obj
                continue
            raise InputError(obj.path, obj.line, obj.field, obj.message)
        if fmt is None:
            fmt = "grouped" if _first(obj, RESPONSE_LIST_KEYS)[0] else "flat" if _first(obj, RESPONSE_KEYS)[0] else "grouped"
        try:
            if fmt == "grouped":
                yield parse_grouped(path, n, obj)
            else:
                _add_flat(path, n, obj, flat, group_key)
        except InputError as e:
            if not skip_bad:
                raise
            yield BadRecord(e.path, e.line, e.field, e.detail, json.dumps(obj, default=str)[:500])
    for gid, acc in flat.items():
        labels = acc["labels"]
        if labels is not None and len(labels) != len(acc["responses"]):
            e = InputError(path, acc["line"], "correct", "labels given for only some responses of the group")
            if not skip_bad:
                raise e
            yield BadRecord(e.path, e.line, e.field, e.detail)
            continue
        yield Group(gid, acc["prompt"], acc["responses"], acc["reference"], acc["expert"], labels, acc["meta"])


def _add_flat(path: Path, n: int, obj: dict, acc: dict[str, dict[str, Any]], group_key: str | None) -> None:
    keys = (group_key,) if group_key else GROUP_KEYS
    gkey, gid = _first(obj, keys)
    if gkey is None:
        raise InputError(path, n, group_key or "group_id", f"missing group key (looked for {', '.join(keys)})")
    rkey, resp = _first(obj, RESPONSE_KEYS)
    if rkey is None:
        raise InputError(path, n, "response", "missing")
    resp = _check_str(path, n, rkey, resp)
    gid = str(gid)
    if gid not in acc:
        pkey, prompt = _first(obj, PROMPT_KEYS)
        if pkey is None:
            raise InputError(path, n, "prompt", f"missing (looked for {', '.join(PROMPT_KEYS)})")
        fkey, ref = _first(obj, REFERENCE_KEYS)
        ekey, expert = _first(obj, EXPERT_KEYS)
        used = {gkey, rkey, pkey, fkey, ekey, "correct", "label", "id"}
        acc[gid] = {"prompt": _check_str(path, n, pkey, prompt), "responses": [], "line": n,
                    "reference": None if ref is None else str(ref), "expert": expert,
                    "labels": [] if ("correct" in obj or "label" in obj) else None,
                    "meta": {k: v for k, v in obj.items() if k not in used}}
    g = acc[gid]
    g["responses"].append(resp)
    lab = obj.get("correct", obj.get("label"))
    if g["labels"] is not None and lab is not None:
        if not isinstance(lab, (bool, int)) or lab not in (0, 1):
            raise InputError(path, n, "correct", "expected a boolean")
        g["labels"].append(bool(lab))
