"""RARO's replay buffer (App. C.1, Algorithm 2 line 11): past (question, expert, policy) triples, so that half
of each critic batch replays old policy "attacks"."""

from __future__ import annotations

import json
import os
import random
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

FORMAT = "rewardkit.raro.replay/1"  # the saved file's "format" tag


@dataclass(frozen=True)
class CriticExample:
    """One (question, expert answer, policy answer) triple: a critic training input."""

    question: str
    expert: str
    policy: str




class ReplayBuffer:
    """A bounded reservoir (Algorithm R) of past critic examples, seeded and persisted atomically.

    Every example ever added has the same chance ``capacity / seen`` of being in the buffer, so old
    policy modes stay represented (App. C.1: the critic must keep seeing every past "attack").
    """

    def __init__(self, capacity: int = 10_000, seed: int = 0, path: str | os.PathLike | None = None):
        if capacity < 1:
            raise ValueError(f"ReplayBuffer capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self.seen = 0
        self.items: list[CriticExample] = []
        self._rng = random.Random(seed)
        self.path = Path(path) if path is not None else None

    def __len__(self) -> int:
        return len(self.items)

    def add(self, examples: Sequence[CriticExample]) -> None:
        """Reservoir-sample ``examples`` into the buffer."""
        for ex in examples:
            self.seen += 1
            if len(self.items) < self.capacity:
                self.items.append(ex)
            else:
                j = self._rng.randrange(self.seen)
                if j < self.capacity:
                    self.items[j] = ex

    def sample(self, k: int, rng: random.Random) -> list[CriticExample]:
        """Up to ``k`` distinct buffered examples, drawn with the caller's seeded ``rng``."""
        return rng.sample(self.items, min(k, len(self.items)))

    def state(self) -> dict[str, Any]:
        """A JSON-serialisable snapshot (items, counters and the reservoir's RNG state)."""
        version, internal, gauss = self._rng.getstate()
        return {"format": FORMAT, "capacity": self.capacity, "seen": self.seen,
                "rng_state": [version, list(internal), gauss], "items": [asdict(x) for x in self.items]}

    def save(self, path: str | os.PathLike | None = None) -> Path:
        """Write the buffer atomically: a temp file in the same folder, fsync, then ``os.replace``."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise ValueError("ReplayBuffer.save: no path given and the buffer has none")
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self.state(), f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target

    @classmethod
    def load(cls, path: str | os.PathLike) -> ReplayBuffer:
        """Read a buffer written by :meth:`save`; the reservoir continues exactly where it stopped."""
        path = Path(path)
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
            fmt = state.get("format") if isinstance(state, dict) else None
            if fmt != FORMAT:  # another file, or a later format this version cannot continue exactly
                raise ValueError(f"its format is {fmt!r}, not {FORMAT!r}")
            buf = cls(state["capacity"], path=path)
            buf.seen = int(state["seen"])
            buf.items = [CriticExample(**x) for x in state["items"]]
            version, internal, gauss = state["rng_state"]
            buf._rng.setstate((version, tuple(internal), gauss))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"cannot read RARO replay buffer {str(path)!r}: {e}") from e
        return buf

    @classmethod
    def open(cls, path: str | os.PathLike, capacity: int = 10_000, seed: int = 0) -> ReplayBuffer:
        """Load the buffer at ``path`` if it exists, else start an empty one that saves there."""
        p = Path(path)
        if p.exists():
            buf = cls.load(p)
            if buf.capacity != capacity:
                raise ValueError(f"replay buffer {str(p)!r} has capacity {buf.capacity}, asked for {capacity}")
            return buf
        return cls(capacity, seed, p)


def mix_critic_batch(current: Sequence[CriticExample], buffer: ReplayBuffer, size: int, seed: int,
                     ) -> list[tuple[CriticExample, Literal["current", "replay"]]]:
    """Mix(R_new, R) of Algorithm 2 line 11: half the batch from the current rollouts, half from the buffer.

    Draws are without replacement and seeded; when the buffer holds fewer than ``size // 2`` examples the
    rest comes from the current rollouts (and vice versa), so the batch is as full as the data allows.
    """
    rng = random.Random(seed)
    n_replay = min(size // 2, len(buffer))
    n_current = min(size - n_replay, len(current))
    n_replay = min(size - n_current, len(buffer))
    cur = rng.sample(list(current), n_current)
    rep = buffer.sample(n_replay, rng)
    return [(x, "current") for x in cur] + [(x, "replay") for x in rep]
