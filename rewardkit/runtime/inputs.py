"""Reading groups from files: grouped JSONL, one-response-per-line JSONL, Parquet, saved HF datasets.

Rows people already have are read as they are: the shared rollouts (``problem``/``responses``/``correct``),
chat-format prompts (a list of ``{"role", "content"}`` messages: the judge sees the last user turn, the
messages stay in ``Group.metadata["messages"]``), verl rows (``prompt`` as messages,
``reward_model.ground_truth``, ``data_source``, ``extra_info``) and TRL rows (``prompt``/``completion``,
plain or conversational; one completion per line is grouped by ``group_id``/``prompt_id``/``uid``, else
by identical prompt within a ``step``). What the frameworks write during a run reads the same way, so a
finished run can be re-scored: verl's generation dumps (``trainer.rollout_data_dir`` /
``validation_data_dir``: ``STEP.jsonl`` rows ``{"input", "output", "gts", "score", "step", ...}``) and TRL's
completion logs (``log_completions=True``: ``OUTPUT_DIR/completions/completions_STEP.parquet`` rows
``{"step", "prompt", "completion", <reward columns>, "advantage"}``). Every malformed record raises
``InputError`` naming file, line (or row) and field, or, with ``skip_bad=True``, comes out as a ``BadRecord``
so a job can log it and keep going.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
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
#: verl's generation dump row (``RayPPOTrainer._write_generations``): decoded prompt, response, ground truth, reward
VERL_DUMP_KEYS = ("input", "output", "step")
SUPPORTED = ("JSONL (.jsonl: grouped, or one response per line), Parquet (.parquet, either shape) or a saved "
             "Hugging Face dataset folder")
#: formats people try that are not read: named, with what is
UNSUPPORTED_SUFFIXES = {".csv": "CSV", ".tsv": "TSV", ".xlsx": "Excel", ".xls": "Excel", ".json": "a JSON document"}


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
                fmt: str | None = None, source: str | Path | None = None) -> Iterator[Group | BadRecord]:
    """Yield the groups of a file or dataset directory in order (``BadRecord`` for rejects if ``skip_bad``).

    ``fmt``: ``grouped`` (one group per line, ``responses`` list), ``flat`` (one response per line with a
    group key), or None to detect from the first record. Parquet and saved HF datasets take either shape.
    ``source``: read the bytes from there instead (a spooled pipe, see ``spool_stream``); messages and
    default ids still name ``path``.
    """
    for _, item in read_numbered(path, skip_bad=skip_bad, group_key=group_key, fmt=fmt, source=source):
        yield item


def read_numbered(path: str | Path, *, skip_bad: bool = False, group_key: str | None = None,
                  fmt: str | None = None, source: str | Path | None = None
                  ) -> Iterator[tuple[int | None, Group | BadRecord]]:
    """``read_groups`` with the line (or row) each group starts at."""
    p = Path(path)
    src = Path(source) if source is not None else p
    if fmt not in (None, "grouped", "flat"):
        raise InputError(p, None, None, f"unknown format {fmt!r} (expected grouped or flat)")
    if not src.exists():
        raise FileNotFoundError(f"{p}: no such file or directory")
    if src.is_dir():
        records = _dataset_records(src, p)
    elif p.suffix.lower() in UNSUPPORTED_SUFFIXES and not _starts_with_object(src):
        raise InputError(p, None, None, f"{UNSUPPORTED_SUFFIXES[p.suffix.lower()]} is not an input format rewardkit "
                                        f"reads; it reads {SUPPORTED}")
    elif p.suffix == ".parquet":
        records = _parquet_records(src, p)
    else:
        records = _jsonl_records(src, p)
    yield from _to_groups(p, records, skip_bad=skip_bad, group_key=group_key, fmt=fmt)


def spool_stream(path: str | Path, into: str | Path) -> str:
    """Copy what a pipe (``<(cmd)``, a FIFO) carries into the file ``into``, hashing it as it is read (a
    stream can be read only once); return its SHA-256. A FIFO with no writer reads as empty, never hangs."""
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # opening a FIFO without a writer would block
    try:
        os.set_blocking(fd, True)  # no writer: the first read is end-of-file
        with open(into, "wb") as out:
            while chunk := os.read(fd, 1 << 20):
                h.update(chunk)
                out.write(chunk)
    finally:
        os.close(fd)
    return h.hexdigest()


def _starts_with_object(src: Path) -> bool:
    """True when the file's first non-blank byte opens a JSON object (JSONL whatever its suffix)."""
    with open(src, "rb") as f:
        head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"{")


def _jsonl_records(src: Path, p: Path) -> Iterator[tuple[int, dict | BadRecord]]:
    with open(src, "rb") as f:
        for n, raw in enumerate(f, 1):
            if n == 1 and raw.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark (Windows editors)
                raw = raw[3:]
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
                msg = e.msg.removesuffix(" at")  # "Unterminated string starting at" + " at column 3"
                if n == 1 and "," in text and not text.lstrip().startswith(("{", "[")):  # a CSV header
                    raise InputError(p, n, None, f"malformed JSON ({msg} at column {e.colno}); this looks like "
                                                 f"CSV, which rewardkit does not read: it reads {SUPPORTED}") from None
                yield n, BadRecord(str(p), n, None, f"malformed JSON ({msg} at column {e.colno})", text[:500])
                continue
            except RecursionError:
                yield n, BadRecord(str(p), n, None, "JSON nested too deeply", text[:500])
                continue
            except ValueError as e:  # e.g. an integer of more than 4,300 digits
                yield n, BadRecord(str(p), n, None, f"unreadable JSON value ({str(e).split(';')[0]})", text[:500])
                continue
            if not isinstance(obj, dict):
                yield n, BadRecord(str(p), n, None, f"expected a JSON object, got {_kind(obj)}", text[:500])
                continue
            yield n, obj


def _parquet_records(src: Path, p: Path) -> Iterator[tuple[int, dict | BadRecord]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(src)
        n = 0
        for batch in pf.iter_batches(batch_size=1024):
            for row in batch.to_pylist():
                n += 1
                yield n, row
    except (pa.ArrowException, OSError) as e:
        raise InputError(p, None, None, f"not a readable Parquet file ({_one_line(e)})") from None


def _dataset_records(src: Path, p: Path) -> Iterator[tuple[int, dict | BadRecord]]:
    from datasets import load_from_disk

    try:
        ds = load_from_disk(str(src))
    except Exception as e:  # datasets raises FileNotFoundError, ValueError or arrow errors for a wrong folder
        raise InputError(p, None, None, f"not a saved Hugging Face dataset folder ({_one_line(e)})") from None
    if hasattr(ds, "keys"):  # a DatasetDict: take the only split, or refuse to guess
        splits = list(ds.keys())
        if len(splits) != 1:
            raise InputError(p, None, None, f"dataset has splits {splits}; pass the folder of one split")
        ds = ds[splits[0]]
    yield from enumerate(ds, 1)


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:300] or type(e).__name__


def _first(obj: dict, keys: tuple[str, ...]) -> tuple[str | None, Any]:
    for k in keys:
        if k in obj and obj[k] is not None:
            return k, obj[k]
    return None, None


def _check_str(path: Path, n: int, field: str, v: Any) -> str:
    if not isinstance(v, str):
        raise InputError(path, n, field, f"expected a string, got {_kind(v)}")
    return v


def _kind(v: Any) -> str:
    return "null" if v is None else "boolean" if isinstance(v, bool) else type(v).__name__


def _text(path: Path, n: int, field: str, v: Any, prompt: bool = False) -> str:
    """A prompt or response: a string, or chat messages (the last user turn, else the last message)."""
    if isinstance(v, str):
        return v
    if isinstance(v, list) and v and all(isinstance(m, dict) for m in v):
        contents = []
        for i, m in enumerate(v):
            if not isinstance(m.get("role"), str):
                raise InputError(path, n, f"{field}[{i}].role", f"expected a string, got {_kind(m.get('role'))}")
            contents.append((m["role"], _content(path, n, f"{field}[{i}].content", m.get("content"))))
        user = [c for r, c in contents if r == "user"]
        return user[-1] if prompt and user else contents[-1][1]
    raise InputError(path, n, field, f"expected a string or a list of chat messages, got {_kind(v)}")


def _content(path: Path, n: int, field: str, c: Any) -> str:
    """Message content: a string or a list of OpenAI-style parts whose text parts are joined."""
    if isinstance(c, str):
        return c
    if isinstance(c, list) and all(isinstance(x, dict) for x in c):
        return "".join(_check_str(path, n, f"{field}[{i}].text", x.get("text")) for i, x in enumerate(c)
                       if x.get("type", "text") == "text")
    raise InputError(path, n, field, f"expected a string, got {_kind(c)}")


def _reference(path: Path, n: int, field: str, v: Any) -> str:
    """A reference answer: a string or a finite number (JSON true, lists, NaN, 1e999 are refused)."""
    if isinstance(v, str):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise InputError(path, n, field, f"expected a string or a finite number, got {v}")
        return str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)
    raise InputError(path, n, field, f"expected a string or a number, got {_kind(v)}")


def _find_reference(path: Path, n: int, obj: dict) -> tuple[str | None, str | None]:
    """The reference from a top-level key, else verl's ``reward_model.ground_truth``."""
    fkey, ref = _first(obj, REFERENCE_KEYS)
    rm = obj.get("reward_model")
    if fkey is None and rm is not None and not isinstance(rm, dict):  # verl: {"style": ..., "ground_truth": ...}
        raise InputError(path, n, "reward_model", f"expected an object with 'ground_truth' (verl's shape), got {_kind(rm)}")
    if fkey is None and rm is not None and rm.get("ground_truth") is not None:
        fkey, ref = "reward_model.ground_truth", rm["ground_truth"]
    return fkey, None if fkey is None else _reference(path, n, fkey, ref)


def _group_id(path: Path, n: int, field: str, v: Any) -> str:
    if isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool)):
        return str(v)
    raise InputError(path, n, field, f"expected a string or an integer, got {_kind(v)}")


def _labels(path: Path, n: int, field: str, v: Any, size: int) -> list[bool]:
    if not isinstance(v, list) or not all(isinstance(x, (bool, int)) and x in (0, 1) for x in v):
        raise InputError(path, n, field, "expected a list of booleans")
    if len(v) != size:
        raise InputError(path, n, field, f"{len(v)} labels for {size} responses")
    return [bool(x) for x in v]


def _prompt(path: Path, n: int, obj: dict, meta: dict) -> tuple[str, str]:
    """(key, prompt text); chat messages are kept in ``meta["messages"]``."""
    pkey, prompt = _first(obj, PROMPT_KEYS)
    if pkey is None:
        raise InputError(path, n, "prompt", f"missing (looked for {', '.join(PROMPT_KEYS)})")
    text = _text(path, n, pkey, prompt, prompt=True)
    if not isinstance(prompt, str):
        meta["messages"] = prompt
    return pkey, text


def parse_grouped(path: Path, n: int, obj: dict) -> Group:
    """One grouped record (``problem``/``prompt``, ``responses``, optional ``answer``, ``solution``, ``correct``)."""
    rkey, responses = _first(obj, RESPONSE_LIST_KEYS)
    if rkey is None:
        raise InputError(path, n, "responses", "missing (expected a list of response strings)")
    if not isinstance(responses, list):
        raise InputError(path, n, rkey, f"expected a list, got {_kind(responses)}")
    if not responses:
        raise InputError(path, n, rkey, "empty response list")
    texts = [_text(path, n, f"{rkey}[{i}]", r) for i, r in enumerate(responses)]
    meta: dict[str, Any] = {}
    pkey, prompt = _prompt(path, n, obj, meta)
    fkey, ref = _find_reference(path, n, obj)
    ekey, expert = _first(obj, EXPERT_KEYS)
    expert = None if ekey is None else _check_str(path, n, ekey, expert)
    lkey, labels = _first(obj, LABEL_KEYS)
    labels = None if lkey is None else _labels(path, n, lkey, labels, len(texts))
    gid = _group_id(path, n, "id", obj["id"]) if obj.get("id") is not None else f"{path.stem}-{n}"
    used = {rkey, pkey, fkey, ekey, lkey, "id"}
    meta = {**{k: v for k, v in obj.items() if k not in used}, **meta}
    return Group(gid, prompt, texts, ref, expert, labels, meta)


def group_from_record(obj: dict, path: str | Path = "<record>", line: int = 1) -> Group:
    """One grouped record (a dict from any source) as a Group; raises ``InputError`` naming the field."""
    return parse_grouped(Path(path), line, obj)


def _to_groups(path: Path, records: Iterator[tuple[int, dict | BadRecord]], *, skip_bad: bool,
               group_key: str | None, fmt: str | None) -> Iterator[tuple[int | None, Group | BadRecord]]:
    flat: dict[str, dict[str, Any]] = {}  # group key -> accumulated group (flat format)
    for n, obj in records:
        if isinstance(obj, BadRecord):
            if skip_bad:
                yield n, obj
                continue
            raise InputError(obj.path, obj.line, obj.field, obj.message)
        obj = _from_verl_dump(obj)
        if fmt is None:
            fmt = "grouped" if _first(obj, RESPONSE_LIST_KEYS)[0] else "flat" if _first(obj, RESPONSE_KEYS)[0] else "grouped"
        try:
            if fmt == "grouped":
                yield n, parse_grouped(path, n, obj)
            else:
                _add_flat(path, n, obj, flat, group_key)
        except InputError as e:
            if not skip_bad:
                raise
            yield n, BadRecord(e.path, e.line, e.field, e.detail, _raw(obj))
    for gid, acc in flat.items():
        labels = acc["labels"]
        if labels is not None and len(labels) != len(acc["responses"]):
            e = InputError(path, acc["line"], "correct", "labels given for only some responses of the group")
            if not skip_bad:
                raise e
            yield acc["line"], BadRecord(e.path, e.line, e.field, e.detail)
            continue
        yield acc["line"], Group(acc.get("id", gid), acc["prompt"], acc["responses"], acc["reference"], acc["expert"],
                                 labels, acc["meta"])


def _from_verl_dump(obj: dict) -> dict:
    """A verl generation dump row as a one-response row: ``input`` -> prompt, ``output`` -> response, ``gts`` ->
    reference; its per-response fields (the logged ``score``, reward extras) are dropped from the group's
    metadata, ``step`` is kept (groups are the rows of one input within one step). Other rows pass as they are."""
    if not all(k in obj for k in VERL_DUMP_KEYS) or _first(obj, PROMPT_KEYS + RESPONSE_KEYS)[0] is not None:
        return obj
    row = {"prompt": obj["input"], "response": obj["output"], "step": obj["step"], "source": "verl generation dump"}
    if obj.get("gts") is not None:
        row["ground_truth"] = obj["gts"]
    return row


def _raw(obj: Any) -> str:
    try:
        return json.dumps(obj, default=str)[:500]
    except (ValueError, RecursionError):
        return repr(obj)[:500]


def _add_flat(path: Path, n: int, obj: dict, acc: dict[str, dict[str, Any]], group_key: str | None) -> None:
    keys = (group_key,) if group_key else GROUP_KEYS
    gkey, gid = _first(obj, keys)
    if gkey is None and group_key:
        raise InputError(path, n, group_key, "missing group key")
    rkey, resp = _first(obj, RESPONSE_KEYS)
    if rkey is None:
        raise InputError(path, n, "response", "missing")
    resp = _text(path, n, rkey, resp)
    meta: dict[str, Any] = {}
    pkey, prompt = _prompt(path, n, obj, meta)
    # no group key (TRL rows, verl dumps): the completions of one prompt within one logged step form a group
    gid = (_group_id(path, n, gkey, gid) if gkey else
           "prompt:" + json.dumps([obj.get("step"), obj[pkey]], sort_keys=True, default=str))
    if gid not in acc:
        fkey, ref = _find_reference(path, n, obj)
        ekey, expert = _first(obj, EXPERT_KEYS)
        used = {gkey, rkey, pkey, fkey, ekey, "correct", "label", "id"}
        acc[gid] = {"prompt": prompt, "responses": [], "line": n, "reference": ref,
                    "expert": None if ekey is None else _check_str(path, n, ekey, expert),
                    "labels": [] if ("correct" in obj or "label" in obj) else None,
                    "meta": {**{k: v for k, v in obj.items() if k not in used}, **meta}}
        if not gkey:
            acc[gid]["id"] = f"{path.stem}-{n}"
    g = acc[gid]
    lab = obj.get("correct", obj.get("label"))
    if g["labels"] is not None and lab is not None:
        if not isinstance(lab, (bool, int)) or lab not in (0, 1):
            raise InputError(path, n, "correct", "expected a boolean")
        g["labels"].append(bool(lab))
    g["responses"].append(resp)
