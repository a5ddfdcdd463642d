"""RARO's binary critic (Sec. 3.2), the baseline the relativistic critic replaces (Table 7 "w/o relativistic critic").

The critic sees one (question, answer) pair, no expert reference and no tie option, and classifies the
answer as written by the ``expert`` or by the ``policy``. Rewards (Sec. 3.2):

    R_policy = 1[l = expert] - 1[l = policy]            (the policy is rewarded for passing as the expert)
    R_critic = 1[l is correct] - 1[l is incorrect]      (for a policy answer: -R_policy)

It shares the relativistic critic's machinery (``CriticJudge``: options, answer views, one seeded backend
call per batch); only the prompt, the verdicts and the rewards differ. Unparseable output is ``invalid``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rewardkit.backends.base import Message, cost_of
from rewardkit.options import option
from rewardkit.prompts.raro import BINARY_VERDICT_CHOICES, BINARY_VERDICT_PREFIX, binary_critic_user_prompt
from rewardkit.raro.critic import CriticBaseOptions, CriticJudge, answer_view
from rewardkit.scoring import VerdictMode
from rewardkit.types import Group, GroupScore, Status
from rewardkit.verdicts import parse_expert_policy


def binary_policy_reward(label: str) -> float:
    """R_policy (Sec. 3.2): +1 when the critic labels the policy's answer ``expert``, -1 when ``policy``."""
    if label not in ("expert", "policy"):
        raise ValueError(f"binary critic label must be 'expert' or 'policy', got {label!r} (mask invalid verdicts)")
    return 1.0 if label == "expert" else -1.0


def expected_binary_reward(probs: Sequence[float]) -> float:
    """E[R_policy] = P(expert) - P(policy) under the verdict probabilities (Sec. 3.2's "difference in probabilities")."""
    p_exp, p_pol = (float(x) for x in probs)
    return p_exp - p_pol


def binary_critic_messages(question: str, answer: str, template: str = "math") -> list[Message]:
    """Chat messages of one binary critic query."""
    return [{"role": "user", "content": binary_critic_user_prompt(question, answer, template)}]


@dataclass(frozen=True)
class BinaryCriticOptions(CriticBaseOptions):
    mode: VerdictMode = option("generate", "generate samples the critic's reasoning and parses Expert/Policy; logit reads "
                                    "P(Expert), P(Policy) in one forward pass and returns the expected reward")


class BinaryCriticScorer(CriticJudge):
    """RARO binary critic (Sec. 3.2): each response alone is labelled expert (+1) or policy (-1); no tie."""

    name = "critic-binary"
    Options = BinaryCriticOptions
    options: BinaryCriticOptions
    verdict_choices = BINARY_VERDICT_CHOICES
    verdict_prefix = BINARY_VERDICT_PREFIX

    def _score(self, groups: list[Group]) -> list[GroupScore]:
        flat = [binary_critic_messages(g.prompt, answer_view(r, self.options.view), self.options.template)
                for g in groups for r in g.responses]
        results = self._ask(flat) if flat else []  # one backend call for the whole batch
        out, k = [], 0
        for g in groups:
            out.append(self._binary_group(g, results[k:k + len(g)]))
            k += len(g)
        return out

    def _binary_group(self, g: Group, res: list[Any]) -> GroupScore:
        rewards = np.full(len(g), np.nan)
        statuses: list[Status] = []
        messages: list[str | None] = []
        labels: list[str | None] = []
        detail: list[Any] = []
        for i, r in enumerate(res):
            label = None
            if r.status is not Status.OK:
                statuses.append(r.status)
                messages.append(f"critic backend: {r.error or r.status.value}")
                detail.append(None)
            elif self.verdict_mode == "logit":
                pr = np.asarray(r.probs, dtype=float)
                rewards[i] = expected_binary_reward(pr)
                label = ("expert", "policy")[int(np.argmax(pr))]
                statuses.append(Status.OK)
                messages.append(None)
                detail.append(pr.tolist())
            else:
                detail.append(r.text)
                v = parse_expert_policy(r.text, r.finish_reason())
                if v.ok:
                    label = v.label.lower()  # type: ignore[union-attr]
                    rewards[i] = binary_policy_reward(label)
                statuses.append(v.status)
                messages.append(v.message)
            labels.append(label)
        ok = [lab for lab in labels if lab is not None]
        components = {"critic_label": labels, "critic_reward": -rewards}  # R_critic = -R_policy on policy answers
        stats = {"fooled_rate": (sum(lab == "expert" for lab in ok) / len(ok)) if ok else math.nan}
        extra = {"critic_probs": detail} if self.verdict_mode == "logit" else {"critic_outputs": detail}
        return GroupScore(g.id, rewards, statuses, components, cost_of(res), messages, extra, stats)
