"""One group assembler shared by every reward worker of a training job: a named Ray actor.

A trainer that spreads finished samples over several reward workers (verl 0.9's agent loop sends each
sample to ``random.choice(reward_loop_workers)``) splits every group, and no worker alone can score a
group whole. Each worker forwards its rows to this one actor instead; the actor gathers rows by key
(``GroupGatherer``), scores each full group once and answers every row. The first worker to ask creates
it (``get_if_exists``), the others get the same actor; it needs no CPU reservation (``num_cpus=0``), so
it is scheduled even when the trainer's placement groups hold every CPU.

    handle = shared_assembler("verifier", group_size=8)                 # in each worker
    row = await handle.add.remote(uid, prompt, response, reference)    # -> RowScore
"""

from __future__ import annotations

import logging
import math
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from rewardkit.integrations.common import GroupGatherer, load_scorer
from rewardkit.scoring import Scorer
from rewardkit.types import Reference

ASSEMBLER_NAME = "rewardkit_group_assembler"
log = logging.getLogger(__name__)
_SAID: set[str] = set()
MAX_WAITING_ROWS = 1_000_000  # the actor's concurrency: every waiting row is one pending call


@dataclass(frozen=True)
class RowScore:
    """One row's share of its group's score: reward (None when masked), status, why, size, partial, judge calls."""

    reward: float | None
    status: str
    message: str | None
    group_size: int
    partial: bool
    judge_calls: float


def say_once(reason: str, message: str) -> None:
    """A warning logged once per process and ``reason`` (the job's assembler actor is one process for all its
    workers): the message may carry the row's values, the reason does not, so rows that differ only in their
    values are one warning."""
    if reason not in _SAID:
        _SAID.add(reason)
        log.warning(message)


class GroupAssembler:
    """Gathers rows from many workers into whole groups and scores each once (used as a Ray actor or inline)."""

    def __init__(self, scorer: str | Scorer, group_size: int, group_timeout: float = 300.0,
                 options: dict[str, Any] | None = None):
        self.gatherer = GroupGatherer(load_scorer(scorer, options), group_size, group_timeout)

    async def add(self, key: Hashable, prompt: str, response: str, reference: Reference | None = None,
                  expert: str | None = None) -> RowScore:
        s, i, partial = await self.gatherer.add(key, prompt, response, reference, expert)
        v = float(s.rewards[i])
        return RowScore(None if math.isnan(v) else v, s.statuses[i].value,
                        s.messages[i] if s.messages else None, len(s.rewards), partial,
                        s.cost.judge_calls / max(len(s.rewards), 1))

    def say_once(self, reason: str, message: str) -> None:
        """Log ``message`` (a warning) once per job and reason, however many workers send it."""
        say_once(reason, message)

    def counts(self) -> dict[str, int]:
        """Rows seen, groups scored, partial groups, scorer calls, rows waiting now."""
        return {**self.gatherer.counts, "waiting": self.gatherer.waiting}


def shared_assembler(scorer: str | Scorer, group_size: int, group_timeout: float = 300.0, *,
                     options: dict[str, Any] | None = None, name: str = ASSEMBLER_NAME) -> Any:
    """The job's named assembler actor, created by the first caller (Ray must be initialised)."""
    import ray

    return (ray.remote(GroupAssembler)
            .options(name=name, get_if_exists=True, num_cpus=0, max_concurrency=MAX_WAITING_ROWS)
            .remote(scorer, group_size, group_timeout, options))
