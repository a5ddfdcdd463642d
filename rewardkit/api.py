"""``rewardkit.score``: the Python API's front door. Rows in (dicts, a pandas DataFrame or a datasets.Dataset,
flat or grouped, under the field names the CLI reads), the same rows out with rewards and statuses.

    >>> import rewardkit
    >>> rows = [{"prompt": "2+2?", "response": r"\\boxed{4}", "reference": "4"},
    ...         {"prompt": "2+2?", "response": r"\\boxed{5}", "reference": "4"}]
    >>> [(r["reward"], r["status"]) for r in rewardkit.score(rows)]
    [(1.0, 'ok'), (0.0, 'ok')]
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rewardkit.integrations.common import load_scorer
from rewardkit.runtime.inputs import InputError, field_names, first_field, to_groups
from rewardkit.runtime.jobs import score_batch
from rewardkit.scoring import Scorer
from rewardkit.types import GroupScore


def score(rows: Any, scorer: str | Scorer = "verifier", *, judge: str | None = None,
          fields: dict[str, str] | None = None, **options: Any) -> Any:
    """Score ``rows`` with ``scorer`` (a name, ``module:Class`` or a Scorer) in one scorer call.

    Flat rows (one ``response`` each) are grouped by ``group_id``, else by prompt (and ``step``); each comes
    back with ``reward`` (None when not ok), ``status`` and ``message`` (why not ok). Grouped rows (a
    ``responses`` list each) come back with ``rewards``, ``statuses`` and ``messages``. Field names are the
    CLI's (``label``/``answer``/``gold``... are the reference; a list of references means any is right);
    ``fields={"reference": "my_column"}`` names yours. ``judge`` and ``options`` configure the scorer. A list
    of dicts gives a list of dicts, a DataFrame a DataFrame, a Dataset a Dataset. A malformed row raises a
    ValueError naming the row (0-based) and its field.
    """
    records, kind = _records(rows)
    names = field_names(fields)
    where: list[list[int]] = []  # each group's row numbers
    try:
        groups = [g for _, g in to_groups(Path("row"), iter(enumerate(records)), names=names, rows=where,
                                          unit="row")]
    except InputError as e:
        raise ValueError(f"row {e.line}: " + (f"field {e.field!r}: " if e.field else "") + e.detail) from None
    sc = load_scorer(scorer, options or None, judge)
    out = [dict(r) for r in records]
    for lines, s in zip(where, score_batch(sc, groups) if groups else [], strict=True):
        _answer(out, lines, s, grouped=first_field(records[lines[0]], names["responses"])[0] is not None)
    return _same_kind(out, kind)


def _answer(out: list[dict], lines: list[int], s: GroupScore, grouped: bool) -> None:
    """Write a group's rewards into its rows: as lists into a grouped row, one each into flat rows."""
    rewards = [None if math.isnan(v) else float(v) for v in s.rewards]
    statuses = [st.value for st in s.statuses]
    messages = list(s.messages or [None] * len(statuses))
    if grouped:
        out[lines[0]].update(rewards=rewards, statuses=statuses, messages=messages)
        return
    for i, line in enumerate(lines):
        out[line].update(reward=rewards[i], status=statuses[i], message=messages[i])


def _records(rows: Any) -> tuple[list[dict], str]:
    """``rows`` as a list of dicts, and what kind it was (to hand back the same kind)."""
    if isinstance(rows, dict):
        raise TypeError("rewardkit.score: expected rows (a list of dicts, a DataFrame or a Dataset), got one dict: "
                        "pass [row]")
    if type(rows).__name__ == "DataFrame" and hasattr(rows, "to_dict"):  # pandas: missing values are NaN
        recs = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
                for r in rows.to_dict(orient="records")]
        return recs, "pandas"
    if type(rows).__name__ == "Dataset" and hasattr(rows, "to_list"):
        return rows.to_list(), "datasets"
    try:
        recs = list(rows)
    except TypeError:
        raise TypeError(f"rewardkit.score: expected rows (a list of dicts, a DataFrame or a Dataset), "
                        f"got {type(rows).__name__}") from None
    bad = next((i for i, r in enumerate(recs) if not isinstance(r, dict)), None)
    if bad is not None:
        raise TypeError(f"rewardkit.score: row {bad} is a {type(recs[bad]).__name__}, not a dict")
    return recs, "list"


def _same_kind(out: list[dict], kind: str) -> Any:
    if kind == "pandas":
        import pandas as pd

        return pd.DataFrame(out)
    if kind == "datasets":
        import datasets

        return datasets.Dataset.from_list(out)
    return out
