"""Progress that counts groups as they finish: an executor for ``score_file`` that splits each batch into
sub-batches short enough to report every few seconds.

A batch of 16 groups at ~40 s per group (a CPU judge) would otherwise be 10 minutes without a progress line.
The first call scores one group; from then on a sub-batch holds as many groups as the measured seconds per
group allow within ``interval`` (``PACE_SECONDS``; at least one, at most the whole batch). A fast scorer (the verifier, a GPU
judge) keeps whole batches, so its judge calls stay batched across groups; a slow one reports per group.
Rows are still written (fsync'd) once per batch.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from typing import Any

from rewardkit.types import Group, GroupScore

Batch = list[Group]
#: the longest a sub-batch should take (seconds): a progress line can come at least this often
PACE_SECONDS = 5.0


def paced_executor(scorer: Any, on_groups: Callable[[int], None], *, interval: float | None = None,
                   clock: Callable[[], float] = time.perf_counter) -> Callable[[Iterator[Batch]], Iterator[tuple[Batch, list[GroupScore]]]]:
    """An executor (as ``rewardkit.runtime.jobs.score_file`` takes) scoring locally, in sub-batches of at most
    ``interval`` seconds' worth of groups, calling ``on_groups(n)`` as each sub-batch finishes."""
    from rewardkit.runtime.jobs import score_batch

    interval = PACE_SECONDS if interval is None else interval
    last: float | None = None  # seconds per group of the last sub-batch, measured

    def size() -> int:  # groups in the next sub-batch (its slice ends at the batch's end)
        return 1 if last is None else max(1, math.floor(interval / max(last, 1e-9)))

    def run(batches: Iterator[Batch]) -> Iterator[tuple[Batch, list[GroupScore]]]:
        nonlocal last
        for batch in batches:
            scores: list[GroupScore] = []
            while len(scores) < len(batch):
                part = batch[len(scores):len(scores) + size()]
                t0 = clock()
                scores.extend(score_batch(scorer, part))
                last = (clock() - t0) / len(part)
                on_groups(len(part))
            yield batch, scores

    return run
