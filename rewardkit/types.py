"""The data model: a Group of responses in, a GroupScore out, with typed statuses and a cost record.

A failure is never a silent 0: every response carries a Status, and rewards of non-ok responses are NaN
(``None`` in JSON rows) so trainers mask them instead of learning from them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from typing import Any

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


@dataclass
class Group:
    """One prompt with its N responses, plus whatever a scorer may need to judge them."""

    id: str
    prompt: str
    responses: list[str]
    reference: str | None = None  # reference final answer (verifier gold)
    expert: str | None = None  # expert / reference solution text (RARO critic, GAR references)
    labels: list[bool] | None = None  # per-response correctness labels, when known
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.responses, list):
            self.responses = list(self.responses)
        if self.labels is not None and len(self.labels) != len(self.responses):
            raise ValueError(
                f"group {self.id!r}: {len(self.labels)} labels for {len(self.responses)} responses"
            )

    def __len__(self) -> int:
        return len(self.responses)


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
        self.statuses = [Status(s) for s in self.statuses]
        if len(self.statuses) != len(self.rewards):
            raise ValueError(f"group {self.group_id!r}: {len(self.rewards)} rewards, {len(self.statuses)} statuses")
        for k, v in self.components.items():
            if isinstance(v, (str, bytes)) or not hasattr(v, "__len__") or len(v) != len(self.rewards):
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
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (np.floating, float)):
        f = float(x)
        return None if math.isnan(f) else f
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
