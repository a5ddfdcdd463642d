"""The data model: a Group of responses in, a GroupScore out, with typed statuses and a cost record.

A failure is never a silent 0: every response carries a Status, and rewards of non-ok responses are NaN
(``None`` in JSON rows) so trainers mask them instead of learning from them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from typing import Any, TypeVar

import numpy as np


class Status(str, Enum):
    """What happened to one response (or one judge call)."""

    OK = "ok"
    ABSTAIN = "abstain"  # the scorer has no opinion (e.g. no expert answer to compare with)
    INVALID = "invalid"  # unparseable judge output
    TIMEOUT = "timeout"
    ERROR = "error"

    def __str__(self) -> str:  # plain value in f-strings and JSON
        return self.value


Reference = str | tuple[str, ...]  # one reference answer, or several of which any is right


@dataclass
class Group:
    """One prompt with its N responses, plus whatever a scorer may need to judge them.

    Types are checked here, so a mistake is one clear ``TypeError`` instead of a wrong score later: a string
    is not a list of responses, and a number as a reference reads as its text, as the CLI reads it. A list
    of references means "any of these is right" (verl's ``ground_truth`` lists, math-verify's several golds):
    ``reference`` then holds a tuple of strings (a list of one is that one string).

    >>> Group("a", "2+2?", [r"\\boxed{4}"], reference=4).reference
    '4'
    >>> Group("a", "2+2?", [r"\\boxed{4}"], reference=["4", "four"]).references
    ('4', 'four')
    >>> Group("a", "2+2?", r"\\boxed{4}")
    Traceback (most recent call last):
    ...
    TypeError: group 'a': responses must be a list of strings, got a str (one response? pass [response])
    """

    id: str
    prompt: str
    responses: list[str]
    reference: Reference | None = None  # reference final answer(s) (verifier gold; several: any is right)
    expert: str | None = None  # expert / reference solution text (RARO critic, GAR references)
    labels: list[bool] | None = None  # per-response correctness labels, when known
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.id, int) and not isinstance(self.id, bool):
            self.id = str(self.id)
        where = f"group {self.id!r}"
        if not isinstance(self.id, str):
            raise TypeError(f"group id must be a string, got {_kind(self.id)}")
        if not isinstance(self.prompt, str):
            raise TypeError(f"{where}: prompt must be a string, got {_kind(self.prompt)}")
        if isinstance(self.responses, (str, bytes)):
            raise TypeError(f"{where}: responses must be a list of strings, got a {type(self.responses).__name__} "
                            "(one response? pass [response])")
        try:
            self.responses = list(self.responses)
        except TypeError:
            raise TypeError(f"{where}: responses must be a list of strings, got {_kind(self.responses)}") from None
        bad = next((i for i, r in enumerate(self.responses) if not isinstance(r, str)), None)
        if bad is not None:
            raise TypeError(f"{where}: responses[{bad}] must be a string, got {_kind(self.responses[bad])}")
        self.reference = reference_value(self.reference, f"{where}: reference")
        if self.expert is not None and not isinstance(self.expert, str):
            raise TypeError(f"{where}: expert must be a string or None, got {_kind(self.expert)}")
        if self.labels is not None:
            try:  # read out once: a generator checked, then listed, would come out empty
                labels = None if isinstance(self.labels, (str, bytes)) else list(self.labels)
            except TypeError:
                labels = None
            if labels is None or not all(isinstance(x, (bool, np.bool_))
                                         or (isinstance(x, (int, float, np.number)) and x in (0, 1)) for x in labels):
                raise TypeError(f"{where}: labels must be a list of booleans (one per response)")
            self.labels = [bool(x) for x in labels]
            if len(self.labels) != len(self.responses):
                raise ValueError(f"{where}: {len(self.labels)} labels for {len(self.responses)} responses")
        if not isinstance(self.metadata, dict):
            raise TypeError(f"{where}: metadata must be a dict, got {_kind(self.metadata)}")

    def __len__(self) -> int:
        return len(self.responses)

    @property
    def references(self) -> tuple[str, ...]:
        """Every reference answer (any of them is right); empty when the group has none."""
        return as_references(self.reference)


def as_references(reference: Any) -> tuple[str, ...]:
    """Every reference answer in ``reference`` (one, several, a number, None) as a tuple of strings."""
    r = reference_value(reference)
    return () if r is None else (r,) if isinstance(r, str) else r


def reference_value(v: Any, where: str = "reference") -> Reference | None:
    """A reference as the data model keeps it: a string, a tuple of several strings (any is right), or None.

    Numbers read as their text (``4`` -> ``"4"``, ``4.0`` -> ``"4"``: the CLI's rule); booleans, NaN and
    infinities are refused; a list (or tuple, or numpy array) of references keeps its distinct entries in order.
    """
    if isinstance(v, np.ndarray) and v.ndim == 0:  # a 0-d array (a parquet/numpy cell) is its one value
        v = v.item()
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, (list, tuple, np.ndarray)):
        items = [reference_value(x, f"{where}[{i}]") for i, x in enumerate(list(v))]
        if any(not isinstance(x, str) for x in items):
            k = next(i for i, x in enumerate(items) if not isinstance(x, str))
            raise TypeError(f"{where}[{k}]: expected a string or a number, got {_kind(list(v)[k])}")
        out = tuple(dict.fromkeys(items))  # type: ignore[arg-type]
        if not out:
            raise ValueError(f"{where}: an empty list of references (no reference? pass None)")
        return out[0] if len(out) == 1 else out
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{where}: expected a string or a number, got a boolean (correctness goes in labels)")
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if not math.isfinite(f):
            raise ValueError(f"{where}: expected a string or a finite number, got {f}")
        return str(int(f)) if f.is_integer() and abs(f) < 1e15 else repr(f)
    raise TypeError(f"{where}: expected a string, a number or a list of them, got {_kind(v)}")


def reference_text(reference: Reference | None) -> str | None:
    """A reference as a judge reads it: the answer itself, or several as "one of: a | b" (any is right)."""
    if reference is None or isinstance(reference, str):
        return reference
    return "any one of these (each is correct): " + " | ".join(reference)


def _kind(v: Any) -> str:
    return "None" if v is None else "a boolean" if isinstance(v, bool) else f"a {type(v).__name__}"


@dataclass
class Cost:
    """What scoring cost. Each field has one meaning in every scorer:

    ``judge_calls`` backend requests executed (a cache hit is not a call); ``prompt_tokens`` /
    ``completion_tokens`` of those requests; ``verifier_calls`` answer or proof checks actually executed
    (not cache hits); ``cache_hits`` judge or verifier answers served from a cache; ``seconds`` wall time.
    """

    judge_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    verifier_calls: int = 0
    cache_hits: int = 0
    seconds: float = 0.0

    def __add__(self, other: Cost) -> Cost:
        return Cost(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def __iadd__(self, other: Cost) -> Cost:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def total(cls, costs: Iterable[Cost]) -> Cost:
        out = cls()
        for c in costs:
            out += c
        return out


@dataclass
class GroupScore:
    """Per-response rewards and statuses of one group, named parts for logging, and the cost.

    ``rewards[i]`` is NaN whenever ``statuses[i]`` is not ``Status.OK``, and rows (``to_row``) write every
    component value of such a response as null too.
    ``components`` holds per-response arrays only (each of length N, e.g. ``{"verifier": [1, 0, ...]}``), so a
    logger can read every entry the same way; per-group values (a routing decision, a gate outcome, counts)
    go in ``stats``; anything else a scorer reports (verdict logs, matches) goes in ``extra``.
    """

    group_id: str
    rewards: np.ndarray
    statuses: list[Status]
    components: dict[str, Any] = field(default_factory=dict)
    cost: Cost = field(default_factory=Cost)
    messages: list[str | None] | None = None  # per-response reason for a non-ok status
    extra: dict[str, Any] = field(default_factory=dict)  # the scorer's own fields (verdicts, slices, ...)
    stats: dict[str, Any] = field(default_factory=dict)  # per-group values (scalars, labels) for logging

    def __post_init__(self) -> None:
        self.rewards = np.asarray(self.rewards, dtype=np.float64)
        if self.rewards.ndim != 1:
            raise ValueError(f"group {self.group_id!r}: rewards must be one value per response, got shape "
                             f"{self.rewards.shape}")
        self.statuses = [Status(s) for s in self.statuses]
        if len(self.statuses) != len(self.rewards):
            raise ValueError(f"group {self.group_id!r}: {len(self.rewards)} rewards, {len(self.statuses)} statuses")
        if self.messages is not None:  # one per response, or a reader pairs a reason with the wrong response
            if isinstance(self.messages, (str, bytes)) or len(self.messages) != len(self.rewards):
                raise ValueError(f"group {self.group_id!r}: messages must hold one entry (or None) per response "
                                 f"({len(self.rewards)})")
            self.messages = list(self.messages)
        for k, v in self.components.items():
            if (isinstance(v, (str, bytes)) or not hasattr(v, "__len__") or getattr(v, "ndim", 1) == 0  # 0-d array
                    or len(v) != len(self.rewards)):
                raise ValueError(f"group {self.group_id!r}: component {k!r} must hold one value per response "
                                 f"({len(self.rewards)}); put per-group values in GroupScore.stats")
        bad = [i for i, s in enumerate(self.statuses) if s is not Status.OK and not math.isnan(self.rewards[i])]
        if bad:
            # enforce the contract rather than trust every scorer: non-ok means no reward
            self.rewards = self.rewards.copy()
            self.rewards[bad] = np.nan
        missing = [i for i, s in enumerate(self.statuses) if s is Status.OK and math.isnan(self.rewards[i])]
        if missing:
            raise ValueError(f"group {self.group_id!r}: responses {missing} are ok but have no reward")
        infinite = [i for i, s in enumerate(self.statuses) if s is Status.OK and math.isinf(self.rewards[i])]
        if infinite:  # an infinite reward makes every advantage of its group nan (x - mean): refused where made
            raise ValueError(f"group {self.group_id!r}: responses {infinite} are ok but their reward is infinite")

    @property
    def mask(self) -> np.ndarray:
        """True where the reward is usable (status ok)."""
        return np.array([s is Status.OK for s in self.statuses], dtype=bool)

    def to_row(self) -> dict[str, Any]:
        """A plain JSON-serialisable row: rewards and every component value as None for masked responses
        (a response that failed has no verifier or judge value to log either, whatever the scorer computed
        on what it was sent: a 0.0 there would read as a wrong answer)."""
        ok = self.mask
        row: dict[str, Any] = {
            "id": self.group_id,
            "rewards": [None if math.isnan(r) else float(r) for r in self.rewards],
            "statuses": [s.value for s in self.statuses],
            "components": {str(k): [_jsonable(x) if ok[i] else None for i, x in enumerate(v)]
                           for k, v in self.components.items()},
            "stats": _jsonable(self.stats),
            "cost": self.cost.to_dict(),
        }
        if self.messages is not None and any(m for m in self.messages):
            row["messages"] = list(self.messages)
        for k, v in self.extra.items():
            if k in row:
                raise ValueError(f"scorer field {k!r} would overwrite a standard output field")
            row[k] = _jsonable(v)
        return row

    @classmethod
    def failed(cls, group_id: str, n: int, status: Status, message: str, **kw: Any) -> GroupScore:
        """A group whose every response failed the same way (e.g. the judge timed out)."""
        return cls(group_id, np.full(n, np.nan), [status] * n, messages=[message] * n, **kw)


def lone_surrogate(s: Any) -> int | None:
    """Index of the first lone surrogate in a string (text that cannot be written as UTF-8), else None."""
    if not isinstance(s, str):
        return None
    try:
        s.encode("utf-8")
        return None
    except UnicodeEncodeError as e:
        return e.start


def _jsonable(x: Any) -> Any:
    """``x`` as plain JSON values: numpy scalars and arrays as Python ones, enums as their values, and a float
    JSON cannot hold (NaN, +-inf: a log-probability of a zero probability) as null, so the row stays JSON."""
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (np.floating, float)):
        f = float(x)
        return f if math.isfinite(f) else None
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, Enum):
        return x.value
    return x


def to_tensors(scores: Sequence[GroupScore], device: str = "cpu", dtype: Any = None):
    """Stack equal-size groups into ``(rewards, mask)`` torch tensors of shape [G, N] on ``device``.

    Masked rewards are 0 in the tensor *and* False in the mask: use the mask.
    """
    import torch

    sizes = {len(s.rewards) for s in scores}
    if len(sizes) > 1:
        raise ValueError(f"groups have different sizes {sorted(sizes)}; use to_tensors per group")
    r = np.stack([np.nan_to_num(s.rewards, nan=0.0) for s in scores]) if scores else np.zeros((0, 0))
    m = np.stack([s.mask for s in scores]) if scores else np.zeros((0, 0), dtype=bool)
    dtype = dtype or torch.float32
    return torch.as_tensor(r, dtype=dtype, device=device), torch.as_tensor(m, device=device)


_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


def batch_call(call: Callable[[Sequence[_Item]], Iterable[_Result]], items: Sequence[_Item], who: str, *,
               results: str = "results", of: str = "items", error: type[Exception] = RuntimeError) -> list[_Result]:
    """One batched call to a pluggable part (a Lean checker, a verifier, a token counter), none for no item, its
    answer checked by ``one_per_item``."""
    if not items:
        return []
    return one_per_item(call(items), items, who, results=results, of=of, error=error)


def one_per_item(out: Iterable[_Result], items: Sequence[Any], who: str, *, results: str = "results",
                 of: str = "items", error: type[Exception] = RuntimeError) -> list[_Result]:
    """A batched call's answer as a list (a generator or tuple read out), checked: one result per item, in order.
    Another number is ``error`` naming ``who``, never a result paired with another item."""
    out = out if isinstance(out, list) else list(out)
    if len(out) != len(items):
        raise error(f"{who} returned {len(out)} {results} for {len(items)} {of}")
    return out
