"""Train / validation / held-out splits BY PROBLEM, so no judge is ever trained on a held-out problem.

A problem's split depends only on its normalised text and the seed (a SHA-256 of both, read as a number in
[0, 1)), not on which other rows were loaded: the same problem lands in the same split in every data set
that contains it (ProcessBench's MATH rows, MATH-500 and the shared rollouts share problems). ``pinned``
forces problems into a split (e.g. the headline's mixed groups into the held-out split).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TypeVar

T = TypeVar("T")

DEFAULT_FRACTIONS = {"train": 0.6, "val": 0.1, "test": 0.3}


def problem_key(text: str) -> str:
    """A problem's identity across data sets: its text with runs of whitespace collapsed, stripped."""
    return re.sub(r"\s+", " ", text).strip()


def _unit(key: str, seed: int) -> float:
    """A uniform number in [0, 1) fixed by (seed, key)."""
    h = hashlib.sha256(f"{seed}\0{key}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def assign_split(problem: str, fractions: Mapping[str, float] = DEFAULT_FRACTIONS, seed: int = 0,
                 pinned: Mapping[str, str] | None = None) -> str:
    """The split of one problem: ``pinned[key]`` when given, else by where its hash falls in ``fractions``."""
    if not fractions or any(f < 0 for f in fractions.values()) or abs(sum(fractions.values()) - 1) > 1e-9:
        raise ValueError(f"split fractions must be >= 0 and sum to 1, got {dict(fractions)}")
    key = problem_key(problem)
    if pinned and key in pinned:
        return pinned[key]
    u, acc = _unit(key, seed), 0.0
    names = list(fractions)
    for name in names:
        acc += fractions[name]
        if u < acc:
            return name
    return names[-1]


def split_by_problem(items: Iterable[T], problem: Callable[[T], str], fractions: Mapping[str, float] = DEFAULT_FRACTIONS,
                     seed: int = 0, pinned: Iterable[str] = (), pinned_split: str = "test") -> dict[str, list[T]]:
    """Items grouped by the split of their problem (every split named in ``fractions`` is a key, in order).

    ``pinned``: problem texts that go to ``pinned_split`` whatever their hash.
    """
    if pinned_split not in fractions:
        raise ValueError(f"pinned split {pinned_split!r} is not one of {list(fractions)}")
    pins = {problem_key(p): pinned_split for p in pinned}
    out: dict[str, list[T]] = {name: [] for name in fractions}
    for it in items:
        out[assign_split(problem(it), fractions, seed, pins)].append(it)
    return out


def problems_of(items: Iterable[T], problem: Callable[[T], str]) -> set[str]:
    """The distinct (normalised) problems of some items."""
    return {problem_key(problem(it)) for it in items}


def ids_sha256(ids: Iterable[Hashable]) -> str:
    """SHA-256 of the sorted, newline-joined ids: names a held-out set without listing it."""
    return hashlib.sha256("\n".join(sorted(str(i) for i in ids)).encode()).hexdigest()
