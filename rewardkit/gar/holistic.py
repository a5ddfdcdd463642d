"""GAR's holistic critic baseline (Table 4 row 3): one discriminator call judges the whole trace."""

from __future__ import annotations

from rewardkit.gar.slices import DiscriminatorOptions, DiscriminatorScorer
from rewardkit.gar.slicing import Slice


class HolisticScorer(DiscriminatorScorer):
    """GAR's holistic baseline (Table 4 row 3): ONE discriminator call on the whole trace instead of per slice;
    R = lambda1 * R^m + lambda2 * r(whole trace). Same prompt, verdicts, masking and batching as ``slices``."""

    name = "holistic"
    Options = DiscriminatorOptions
    options: DiscriminatorOptions

    def slices(self, text: str) -> list[Slice]:
        """The whole trace as one piece (none for an empty response)."""
        if not text.strip():
            return []
        return [Slice(text, 0, len(text), self.count_tokens([text])[0])]
