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
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardkit.types import Group, Reference, reference_value

#: Every field an input row may have, under one name each, with the common names read for it (the first one
#: present wins). One meaning per name: ``label`` is the reference answer (OpenRLHF's ``--data.label_key``),
#: correctness is ``correct``. ``fields={"reference": "gold_answer"}`` (``--field reference=gold_answer``) reads
#: the user's own column instead (a dotted name reaches into an object: ``reward_model.ground_truth``).
FIELD_NAMES: dict[str, tuple[str, ...]] = {
    "id": ("id",),
    "prompt": ("prompt", "problem", "question", "query"),
    "responses": ("responses", "completions", "generations"),  # grouped rows: a list
    "response": ("response", "completion", "generation"),  # flat rows: one response each
    "reference": ("reference", "answer", "gold", "gt", "ground_truth", "label", "reward_model.ground_truth"),
    "expert": ("expert", "solution", "expert_answer"),
    "correct": ("correct", "is_correct"),  # a boolean (flat) or a list of booleans (grouped)
    "group_id": ("group_id", "prompt_id", "uid"),  # flat rows: which group a response belongs to
    "step": ("step", "global_step"),
}
#: verl's generation dump row (``RayPPOTrainer._write_generations``): decoded prompt, response, ground truth, reward
VERL_DUMP_KEYS = ("input", "output", "step")
SUPPORTED = ("JSONL (.jsonl: grouped, or one response per line), Parquet (.parquet, either shape) or a saved "
             "Hugging Face dataset folder")
#: formats people try that are not read: named, with what is
UNSUPPORTED_SUFFIXES = {".csv": "CSV", ".tsv": "TSV", ".xlsx": "Excel", ".xls": "Excel", ".json": "a JSON document"}
#: compressed files, known by their first bytes (a per-line "not valid UTF-8" said nothing of it): name, decompressor
COMPRESSED = {b"\x1f\x8b": ("gzip", "zcat"), b"BZh": ("bzip2", "bzcat"), b"\xfd7zXZ\x00": ("xz", "xzcat"),
              b"\x28\xb5\x2f\xfd": ("zstd", "zstdcat")}
PARQUET_MAGIC = b"PAR1"  # a Parquet file's first bytes: read as Parquet whatever its name (.pq, .PARQUET, a pipe)


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


def field_names(fields: dict[str, str] | None = None, group_key: str | None = None) -> dict[str, tuple[str, ...]]:
    """``FIELD_NAMES`` with the user's own names: ``fields`` maps a field to the column holding it (read only
    there); ``group_key`` is the older spelling of ``fields={"group_id": ...}``. An unknown field is a ValueError."""
    names = dict(FIELD_NAMES)
    mapping = dict(fields or {})
    if group_key:
        mapping.setdefault("group_id", group_key)
    for k, v in mapping.items():
        if k not in names:
            raise ValueError(f"unknown field {k!r} in the field mapping; fields: {', '.join(FIELD_NAMES)}")
        if not isinstance(v, str) or not v:
            raise ValueError(f"field mapping {k}={v!r}: expected the name of a column")
        names[k] = (v,)
    return names


def read_groups(path: str | Path, *, skip_bad: bool = False, group_key: str | None = None,
                fmt: str | None = None, source: str | Path | None = None,
                fields: dict[str, str] | None = None) -> Iterator[Group | BadRecord]:
    """Yield the groups of a file or dataset directory in order (``BadRecord`` for rejects if ``skip_bad``).

    ``fmt``: ``grouped`` (one group per line, ``responses`` list), ``flat`` (one response per line with a
    group key), or None to detect from the first record. Parquet and saved HF datasets take either shape.
    ``source``: read the bytes from there instead (a spooled pipe, see ``spool_stream``); messages and
    default ids still name ``path``. ``fields``: the user's column names (see ``FIELD_NAMES``).
    """
    for _, item in read_numbered(path, skip_bad=skip_bad, group_key=group_key, fmt=fmt, source=source,
                                 fields=fields):
        yield item


def read_numbered(path: str | Path, *, skip_bad: bool = False, group_key: str | None = None,
                  fmt: str | None = None, source: str | Path | None = None, fields: dict[str, str] | None = None
                  ) -> Iterator[tuple[int | None, Group | BadRecord]]:
    """``read_groups`` with the line (or row) each group starts at."""
    names = field_names(fields, group_key)
    p = Path(path)
    src = Path(source) if source is not None else p
    if fmt not in (None, "grouped", "flat"):
        raise InputError(p, None, None, f"unknown format {fmt!r} (expected grouped or flat)")
    if not src.exists():
        raise FileNotFoundError(f"{p}: no such file or directory")
    from rewardkit.runtime.output import file_kind

    kind = file_kind(src, follow=True)  # as score_file refuses them: /dev/zero was read as one endless line
    if kind not in ("regular file", "directory", "named pipe (FIFO)"):
        raise InputError(p, None, None, f"is a {kind}, not a file of rows; save them to a file and read that")
    head = _head(src) if src.is_file() else b""  # a pipe is read once, by its reader
    packed = next((v for k, v in COMPRESSED.items() if head.startswith(k)), None)
    if src.is_dir():
        records = _dataset_records(src, p)
    elif packed:
        name, cat = packed
        raise InputError(p, None, None, f"{name}-compressed, which rewardkit does not read; decompress it "
                                        f"({cat} {p} > rows.jsonl) or pass it through a pipe: <({cat} {p})")
    elif p.suffix.lower() in UNSUPPORTED_SUFFIXES and not head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
        raise InputError(p, None, None, f"{UNSUPPORTED_SUFFIXES[p.suffix.lower()]} is not an input format rewardkit "
                                        f"reads; it reads {SUPPORTED}")
    elif p.suffix.lower() == ".parquet" or head.startswith(PARQUET_MAGIC):
        records = _parquet_records(src, p)
    else:
        records = _jsonl_records(src, p)
    yield from to_groups(p, records, skip_bad=skip_bad, names=names, fmt=fmt)


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


def _head(src: Path) -> bytes:
    """The file's first 4 KiB: what tells its format by content (compression and Parquet magic bytes; JSONL under
    another suffix when the first non-blank byte opens a JSON object)."""
    with open(src, "rb") as f:
        return f.read(4096)


def _jsonl_records(src: Path, p: Path) -> Iterator[tuple[int, dict | BadRecord]]:
    fd = os.open(src, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO with no writer reads as empty, never hangs
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as f:
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


def first_field(obj: dict, keys: tuple[str, ...]) -> tuple[str | None, Any]:
    """The first of ``keys`` present (not null) in ``obj``: (key, value); a dotted key reaches into objects."""
    for k in keys:
        v = _get(obj, k)
        if v is not None:
            return k, v
    return None, None


def _get(obj: dict, key: str) -> Any:
    if key in obj or "." not in key:
        return obj.get(key)
    head, _, rest = key.partition(".")
    inner = obj.get(head)
    return _get(inner, rest) if isinstance(inner, dict) else None


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


def _reference(path: Path, n: int, field: str, v: Any) -> Reference:
    """A reference answer: a string, a finite number, or a list of them of which any is right (verl's lists);
    JSON true, NaN, 1e999 are refused. A boolean names the field: ``label`` is the reference, not correctness."""
    if isinstance(v, bool) or (isinstance(v, list) and v and all(isinstance(x, bool) for x in v)):
        raise InputError(path, n, field, f"expected a string or a number (or a list of them), got {_kind(v)}: "
                                         f"{field!r} is read as the reference answer; correctness goes in 'correct'")
    try:
        return reference_value(v, field)  # type: ignore[return-value]
    except (TypeError, ValueError) as e:
        text = str(e)  # "answer[1]: expected ...": the field's own name may hold ": " too
        cut = text.index(": ", len(field))
        raise InputError(path, n, text[:cut], text[cut + 2:]) from None


def _find_reference(path: Path, n: int, obj: dict, names: dict[str, tuple[str, ...]]
                    ) -> tuple[str | None, Reference | None]:
    """The reference: the first of its names present (verl's ``reward_model.ground_truth`` among them)."""
    rm = obj.get("reward_model")
    if "reward_model.ground_truth" in names["reference"] and rm is not None and not isinstance(rm, dict):
        raise InputError(path, n, "reward_model", f"expected an object with 'ground_truth' (verl's shape), got {_kind(rm)}")
    fkey, ref = first_field(obj, names["reference"])
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


def _missing(names: tuple[str, ...], field: str) -> str:
    return (f"missing (looked for {', '.join(names)}; name yours with --field {field}=COLUMN, "
            f"or fields={{'{field}': COLUMN}} in Python)")


def _prompt(path: Path, n: int, obj: dict, meta: dict, names: dict[str, tuple[str, ...]]) -> tuple[str, str]:
    """(key, prompt text); chat messages are kept in ``meta["messages"]``."""
    pkey, prompt = first_field(obj, names["prompt"])
    if pkey is None:
        raise InputError(path, n, names["prompt"][0], _missing(names["prompt"], "prompt"))
    text = _text(path, n, pkey, prompt, prompt=True)
    if not isinstance(prompt, str):
        meta["messages"] = prompt
    return pkey, text


def parse_grouped(path: Path, n: int, obj: dict, names: dict[str, tuple[str, ...]] = FIELD_NAMES) -> Group:
    """One grouped record (``problem``/``prompt``, ``responses``, optional ``answer``, ``solution``, ``correct``)."""
    rkey, responses = first_field(obj, names["responses"])
    if rkey is None:
        raise InputError(path, n, names["responses"][0], _missing(names["responses"], "responses"))
    if not isinstance(responses, list):
        raise InputError(path, n, rkey, f"expected a list, got {_kind(responses)}")
    if not responses:
        raise InputError(path, n, rkey, "empty response list")
    texts = [_text(path, n, f"{rkey}[{i}]", r) for i, r in enumerate(responses)]
    meta: dict[str, Any] = {}
    pkey, prompt = _prompt(path, n, obj, meta, names)
    fkey, ref = _find_reference(path, n, obj, names)
    ekey, expert = first_field(obj, names["expert"])
    expert = None if ekey is None else _check_str(path, n, ekey, expert)
    lkey, labels = first_field(obj, names["correct"])
    labels = None if lkey is None else _labels(path, n, lkey, labels, len(texts))
    ikey, gid = first_field(obj, names["id"])
    gid = _group_id(path, n, ikey, gid) if ikey else f"{path.stem}-{n}"
    used = {rkey, pkey, fkey, ekey, lkey, ikey, "reward_model" if fkey == "reward_model.ground_truth" else None}
    meta = {**{k: v for k, v in obj.items() if k not in used}, **meta}
    return Group(gid, prompt, texts, ref, expert, labels, meta)


def group_from_record(obj: dict, path: str | Path = "<record>", line: int = 1,
                      fields: dict[str, str] | None = None) -> Group:
    """One grouped record (a dict from any source) as a Group; raises ``InputError`` naming the field."""
    return parse_grouped(Path(path), line, obj, field_names(fields))


def to_groups(path: Path, records: Iterator[tuple[int, dict | BadRecord]], *, skip_bad: bool = False,
              names: dict[str, tuple[str, ...]] = FIELD_NAMES, fmt: str | None = None,
              rows: list[list[int]] | None = None, unit: str = "line"
              ) -> Iterator[tuple[int | None, Group | BadRecord]]:
    """Numbered records (dicts, or BadRecords from the reader) as groups: grouped rows one each, flat rows
    (one response each) put together by group key, else by prompt within a step. A group id seen before is
    an error naming both places (``unit`` n: a file's line, a caller's row); with ``skip_bad`` a BadRecord.
    ``rows``, when given, gets each yielded group's record numbers appended (one per response, in order)."""
    flat: dict[str | tuple[str], dict[str, Any]] = {}  # group key -> accumulated group (flat format)
    seen: dict[str, int | None] = {}  # group id -> where it was first

    def once(n: int | None, g: Group, lines: list[int]) -> Group | BadRecord:
        if g.id in seen:
            first = f" (first at {unit} {seen[g.id]})" if seen[g.id] is not None else ""
            e = InputError(path, n, "id", f"duplicate group id {g.id!r}{first}")
            if not skip_bad:
                raise e
            return BadRecord(e.path, e.line, e.field, e.detail)
        seen[g.id] = n
        if rows is not None:
            rows.append(lines)
        return g

    for n, obj in records:
        if isinstance(obj, BadRecord):
            if skip_bad:
                yield n, obj
                continue
            raise InputError(obj.path, obj.line, obj.field, obj.message)
        obj = _from_verl_dump(obj, names)
        if fmt is None:
            fmt = ("grouped" if first_field(obj, names["responses"])[0] else
                   "flat" if first_field(obj, names["response"])[0] else "grouped")
        try:
            if fmt == "grouped":
                g = parse_grouped(path, n, obj, names)
                yield n, once(n, g, [n] * len(g))
            else:
                _add_flat(path, n, obj, flat, names, unit)
        except InputError as e:
            if not skip_bad:
                raise
            yield n, BadRecord(e.path, e.line, e.field, e.detail, _raw(obj))
    for gid, acc in flat.items():
        labels = acc["labels"] if acc["lkey"] is not None else None  # no row of the group labelled
        if labels is not None and len(labels) != len(acc["responses"]):
            e = InputError(path, acc["line"], acc["lkey"], "labels given for only some responses of the group")
            if not skip_bad:
                raise e
            yield acc["line"], BadRecord(e.path, e.line, e.field, e.detail)
            continue
        g = Group(acc.get("id", gid), acc["prompt"], acc["responses"], acc["reference"], acc["expert"], labels,
                  acc["meta"])
        yield acc["line"], once(acc["line"], g, acc["lines"])


def _from_verl_dump(obj: dict, names: dict[str, tuple[str, ...]] = FIELD_NAMES) -> dict:
    """A verl generation dump row as a one-response row: ``input`` -> prompt, ``output`` -> response, ``gts`` ->
    reference; its per-response fields (the logged ``score``, reward extras) are dropped from the group's
    metadata, ``step`` is kept (groups are the rows of one input within one step). Other rows pass as they are."""
    if not all(k in obj for k in VERL_DUMP_KEYS) or first_field(obj, names["prompt"] + names["response"])[0] is not None:
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


def _add_flat(path: Path, n: int, obj: dict, acc: dict[str | tuple[str], dict[str, Any]],
              names: dict[str, tuple[str, ...]], unit: str) -> None:
    gkey, gid = first_field(obj, names["group_id"])
    if gkey is None and names["group_id"] != FIELD_NAMES["group_id"]:
        raise InputError(path, n, names["group_id"][0], "missing group key")
    rkey, resp = first_field(obj, names["response"])
    if rkey is None:
        raise InputError(path, n, names["response"][0], _missing(names["response"], "response"))
    resp = _text(path, n, rkey, resp)
    meta: dict[str, Any] = {}
    pkey, prompt = _prompt(path, n, obj, meta, names)
    skey, step = first_field(obj, names["step"])
    # no group key (TRL rows, verl dumps): the completions of one prompt within one logged step form a group,
    # whose id says which: the step and a digest of the prompt (not a line number: it joins across files);
    # a tuple key, so that no group key a file gives (a string) can fall into it
    gid = (_group_id(path, n, gkey, gid) if gkey else
           (json.dumps([step, _get(obj, pkey)], sort_keys=True, default=str),))
    # the whole row is checked before its group is touched: a refused row (skipped with --skip-bad) leaves no trace,
    # not an empty group or a label-less response
    lkey, lab = first_field(obj, names["correct"])
    if lab is not None and (not isinstance(lab, (bool, int)) or lab not in (0, 1)):
        raise InputError(path, n, lkey, f"expected a boolean (is this response correct?), got {_kind(lab)}")
    fkey, ref = _find_reference(path, n, obj, names)
    ekey, expert = first_field(obj, names["expert"])
    expert = None if ekey is None else _check_str(path, n, ekey, expert)
    if gid in acc:  # rows of one group share its problem: a row that differs is not silently re-keyed
        _same_group(path, n, acc[gid], ((pkey, "prompt", prompt), (fkey, "reference", ref), (ekey, "expert", expert)),
                    unit)
    else:
        ikey = first_field(obj, names["id"])[0]
        used = {gkey, rkey, pkey, fkey, ekey, lkey, ikey, "reward_model" if fkey == "reward_model.ground_truth" else None}
        acc[gid] = {"prompt": prompt, "responses": [], "lines": [], "line": n, "reference": ref, "lkey": None,
                    "expert": expert, "labels": [], "meta": {**{k: v for k, v in obj.items() if k not in used}, **meta}}
        if not gkey:
            acc[gid]["id"] = prompt_id(first_field(obj, (pkey,))[1], step)
    g = acc[gid]
    # a label on any row makes the group labelled: a row without one is then an error (at the group's end), whichever
    # row comes first
    g["lkey"] = g["lkey"] or lkey
    if lab is not None:
        g["labels"].append(bool(lab))
    g["responses"].append(resp)
    g["lines"].append(n)


def _same_group(path: Path, n: int, g: dict[str, Any], fields: tuple[tuple[str | None, str, Any], ...],
                unit: str) -> None:
    """Refuse a flat row whose prompt, reference or expert answer differs from its group's first row (a reused group
    id would otherwise score its responses against another problem's reference); a row without one is not a
    difference."""
    for key, what, v in fields:
        if key is not None and v is not None and v != g[what]:
            raise InputError(path, n, key, f"differs from the {what} of its group ({unit} {g['line']}: "
                             f"{str(g[what])[:60]!r}; here: {str(v)[:60]!r}); one group id is one problem")


def prompt_id(prompt: Any, step: Any = None) -> str:
    """A group id derived from its prompt (text, or chat messages as JSON) and step: the same in every file and
    every re-run, so rows of one prompt join across files.

    >>> prompt_id("What is 2+2?", 3)
    'step3-52cb6b5e4a03'
    """
    text = prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, default=str)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return digest if step is None else f"step{step}-{digest}"
