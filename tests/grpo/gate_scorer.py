"""A scorer for the kill test: LengthScorer's rewards, but its ``block_at``-th call (0-based) blocks while the
file ``gate`` exists, after writing ``<gate>.blocked``: the test kills the run exactly mid-step, every time."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from rewardkit.grpo.toy_rewards import LengthOptions, LengthScorer
from rewardkit.options import option


@dataclass(frozen=True)
class GateOptions(LengthOptions):
    gate: str = option("", "block while this file exists")
    block_at: int = option(1, "which call blocks (0-based)")


class GateScorer(LengthScorer):
    name = "gate"
    Options = GateOptions
    options: GateOptions

    def _setup(self) -> None:
        self.calls = 0

    def _score(self, groups):
        gate = Path(self.options.gate)
        if self.calls == self.options.block_at and gate.exists():
            gate.with_suffix(".blocked").write_text("blocked")
            while gate.exists():
                time.sleep(0.05)
        self.calls += 1
        return super()._score(groups)
