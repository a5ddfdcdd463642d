"""JURY-RL's LLM-as-a-Judge baseline judging every rollout (App. D), beside the majority-only ``llm-judge``.

The App. D judge "assesses the reasoning process and the final answer of each rollout": each response's
trunk (the response without a ``<think>`` block: its written reasoning and its final answer) goes to the
judge ("... whether a given mathematical question and answer are correctly matched ... True or False") in
one batched call for the whole batch: reward 1 for True, 0 for False. This is the per-rollout judge reward
of the paper's LLM-as-a-Judge baseline; ``llm-judge`` (``rewardkit.jury.proof_gate``) instead asks the judge
once per group about the majority answer alone. The judging itself is ``LLMJudgeVerifier``, shared.

A response without a final answer is not sent and gets 0 (the policy gave no answer). A judge failure,
an unparseable judgment or an even split of ``samples`` judgments masks that response with its status.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rewardkit.answers import extract_answer, response_trunk
from rewardkit.jury.proof_gate import LLMJudgeVerifier
from rewardkit.options import option
from rewardkit.scoring import BaseScorer, JudgeOptions
from rewardkit.types import Cost, Group, GroupScore, Status
from rewardkit.verifier import Claim, VerifyResult


@dataclass(frozen=True)
class RolloutJudgeOptions(JudgeOptions):
    samples: int = option(1, "judgments per response, majority of them (an even split masks the response)")
    max_tokens: int = option(512, "generation budget of one judgment")
    temperature: float = option(0.0, "judge sampling temperature (at least 0.7 when samples > 1)")

    def __post_init__(self) -> None:
        super().__post_init__()
        self._at_least(1, "samples", "max_tokens")
        self._at_least(0, "temperature")


def judged_reward(res: VerifyResult) -> tuple[float, Status, str | None]:
    """Reward, status and message of one judgment: verified -> 1, refuted -> 0, anything else masked."""
    if res.outcome == "verified":
        return 1.0, Status.OK, None
    if res.outcome == "refuted":
        return 0.0, Status.OK, None
    status = Status(res.detail.get("status", Status.INVALID.value))
    return math.nan, status, f"judge gave no verdict: {res.reason}"


class RolloutJudgeScorer(BaseScorer):
    """App. D LLM judge on every rollout: reward 1 when the judge says the response's answer is correct."""

    name = "llm-judge-rollout"
    Options = RolloutJudgeOptions
    options: RolloutJudgeOptions

    def _setup(self) -> None:
        o = self.options
        self.verifier = LLMJudgeVerifier(o.judge, mode=o.mode, samples=o.samples, max_tokens=o.max_tokens,
                                         temperature=o.temperature)

    def _score(self, groups: list[Group]) -> list[GroupScore]:
        answers = [[extract_answer(r) for r in g.responses] for g in groups]
        # App. D: the judge sees the reasoning and the final answer, not the extracted answer alone
        claims = [Claim(g.prompt, response_trunk(r)) for g, ans in zip(groups, answers, strict=True)
                  for r, a in zip(g.responses, ans, strict=True) if a is not None]
        judged = iter(self.verifier.verify_many(claims))  # one backend call for the whole batch
        out = []
        for g, ans in zip(groups, answers, strict=True):
            rewards, statuses, messages, p_true = [], [], [], []
            cost = Cost()
            for a in ans:
                if a is None:
                    rewards.append(0.0)
                    statuses.append(Status.OK)
                    messages.append("no final answer in the response: not judged, reward 0")
                    p_true.append(math.nan)
                    continue
                res = next(judged)
                cost += res.cost
                r, s, m = judged_reward(res)
                rewards.append(r)
                statuses.append(s)
                messages.append(m)
                p_true.append(res.detail.get("p_true", math.nan))
            out.append(GroupScore(g.id, np.asarray(rewards, dtype=np.float64), statuses,
                                  {"answer": ans, "p_true": np.asarray(p_true, dtype=np.float64)}, cost, messages))
        return out
