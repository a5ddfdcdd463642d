"""Training prompts: a JSONL file of prompts (with optional reference and expert answers) as Groups."""

from __future__ import annotations

import json
from pathlib import Path

from rewardkit.runtime.inputs import FIELD_NAMES, InputError, first_field
from rewardkit.types import Group


def read_prompts(path: str | Path, limit: int | None = None) -> list[Group]:
    """Groups without responses from JSONL rows (``prompt``/``problem``/``question``, optional ``answer``
    and ``solution``), e.g. ``shared/data/gsm8k/test.jsonl``. A bad row stops with ``file:line: field``."""
    from rewardkit.runtime.jobs import positive_int

    limit = None if limit is None else positive_int("--limit", limit)  # 0 or -1 read one prompt
    p = Path(path)
    out: list[Group] = []
    with open(p, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(p, n, None, f"not JSON ({e.msg})") from None
            if not isinstance(obj, dict):
                raise InputError(p, n, None, "expected a JSON object")
            pk, prompt = first_field(obj, FIELD_NAMES["prompt"])
            if not isinstance(prompt, str) or not prompt.strip():
                raise InputError(p, n, pk or "prompt", "missing or empty (looked for " + ", ".join(FIELD_NAMES["prompt"]) + ")")
            rk, ref = first_field(obj, FIELD_NAMES["reference"])
            _, expert = first_field(obj, FIELD_NAMES["expert"])
            try:  # a number reads as its text, a list as several references (any is right)
                out.append(Group(str(obj.get("id", f"{p.stem}-{n}")), prompt, [], ref, expert))
            except (TypeError, ValueError) as e:
                raise InputError(p, n, rk, str(e)) from None
            if limit is not None and len(out) >= limit:
                break
    if not out:
        raise InputError(p, 0, None, "no prompts in the file")
    return out
