"""Label-free token-distribution rewards: JURY-RL's Self-Certainty and Entropy baselines (Sec. 5, App. D).

JURY-RL App. D defines both on the **final-answer tokens**, the tokens of the answer ``ans(y)`` extracts:

- Self-Certainty: "computed from the log-probabilities of the tokens composing the final answer (as extracted
  by ans(.)); higher cumulative log-probability indicates greater model certainty and yields a higher
  reward": R(y) = sum_{t in A} log p(y_t), A the answer's tokens;
- Entropy Minimization: "inversely related to the policy's output entropy for the final-answer tokens":
  R(y) = -(1/|A|) sum_{t in A} H(p_t), H(p) = -sum_j p(j) log p(j).

That is the default (``over="final-answer"``): the answer is located with ``rewardkit.answers.extract_answer_span``
and its tokens are those overlapping its characters. ``over="whole-response"`` is the formula of the
methods the paper cites, over every response token: Intuitor's self-certainty (Zhao et al., 2025b),
R(y) = (1/n) sum_t KL(U || p_t) = (1/n) sum_t [-log V - (1/V) sum_j log p_t(j)], and the token-level
entropy reward of Prabhudesai et al. (2025), R(y) = -(1/n) sum_t H(p_t).

Both need the model's full next-token distribution at every response position, so they run on backends
that implement ``score_tokens`` (transformers or vLLM); the ``judge`` option names the model scored, normally the
policy itself. A response with no final answer has no answer tokens: under ``final-answer`` it abstains
(masked), it never gets the empty sum's 0, which would be the highest self-certainty.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from rewardkit.answers import extract_answer_span
from rewardkit.backends import JudgeBackend
from rewardkit.backends.base import TokenScoreRequest, TokenScores
from rewardkit.options import Options, option
from rewardkit.scoring import JudgeScorer
from rewardkit.types import Cost, Group, GroupScore, Status


def self_certainty(kl_uniform: np.ndarray) -> float:
    """Intuitor's self-certainty: mean KL(U || p_t) over the tokens (0 for uniform distributions)."""
    return float(np.mean(kl_uniform))


def entropy_reward(entropy: np.ndarray) -> float:
    """Minus the mean token entropy: confident (low-entropy) tokens score higher; at most 0."""
    return -float(np.mean(entropy))


def cumulative_log_probability(logprobs: np.ndarray) -> float:
    """App. D's Self-Certainty on the answer tokens: sum_t log p(y_t) (at most 0; higher is more certain).

    >>> cumulative_log_probability(np.log([0.5, 0.25]))
    -2.0794415416798357
    """
    return float(np.sum(logprobs))


def answer_token_mask(offsets: np.ndarray, start: int, end: int) -> np.ndarray:
    """The tokens whose characters ``offsets[t] = (s, e)`` overlap the answer's characters [start, end).

    >>> answer_token_mask(np.array([[0, 3], [3, 9], [9, 11], [11, 12]]), 9, 11).tolist()
    [False, False, True, False]
    """
    offsets = np.asarray(offsets).reshape(-1, 2)
    return (offsets[:, 0] < end) & (offsets[:, 1] > start) & (offsets[:, 1] > offsets[:, 0]) & (end > start)


Metric = Literal["self-certainty", "entropy"]
Over = Literal["final-answer", "whole-response"]


@dataclass(frozen=True)
class TokenRewardOptions(Options):
    judge: JudgeBackend | str = option("smollm2", "the model whose token distributions are read (normally the policy); "
                                                  "a backend with full next-token distributions (transformers or vllm:), spec or instance")
    system: str = option("", "optional system message of the prompt the response is scored after")
    over: Over = option("final-answer", "final-answer: JURY-RL App. D, the tokens of the extracted answer (self-certainty: "
                                        "their cumulative log-probability); whole-response: every response token "
                                        "(self-certainty: Intuitor's mean KL(U || p_t))")


def _reward(metric: Metric, over: Over, s: TokenScores, mask: np.ndarray) -> float:
    if over == "whole-response":
        return self_certainty(s.kl_uniform) if metric == "self-certainty" else entropy_reward(s.entropy)
    return cumulative_log_probability(s.logprobs[mask]) if metric == "self-certainty" else entropy_reward(s.entropy[mask])


class SelfCertaintyScorer(JudgeScorer):
    """Self-certainty reward: App. D's cumulative log-probability of the final-answer tokens (default), or
    Intuitor's mean KL(U || p_t) over the whole response."""

    name = "self-certainty"
    Options = TokenRewardOptions
    options: TokenRewardOptions
    metric: ClassVar[Metric] = "self-certainty"

    def _score(self, groups: list[Group]) -> list[GroupScore]:
        sys = [{"role": "system", "content": self.options.system}] if self.options.system else []
        reqs = [TokenScoreRequest([*sys, {"role": "user", "content": g.prompt}], r) for g in groups for r in g.responses]
        res = iter(self.judge.score_tokens(reqs) if reqs else [])  # one backend call for the whole batch
        return [self._group(g, [next(res) for _ in g.responses]) for g in groups]

    def _group(self, g: Group, res: list[TokenScores]) -> GroupScore:
        over = self.options.over
        n = len(res)
        rewards = np.full(n, math.nan)
        statuses: list[Status] = []
        messages: list[str | None] = []
        comps: dict[str, list] = {k: [math.nan] * n for k in (
            "answer_log_probability", "answer_self_certainty", "answer_mean_entropy",
            "response_self_certainty", "response_mean_entropy")}
        comps["answer_tokens"] = [0] * n
        comps["response_tokens"] = [len(r.logprobs) for r in res]
        for i, (text, s) in enumerate(zip(g.responses, res, strict=True)):
            if s.status is not Status.OK:
                statuses.append(s.status)
                messages.append(f"token scoring: {s.error or s.status.value}")
                continue
            comps["response_self_certainty"][i] = self_certainty(s.kl_uniform)
            comps["response_mean_entropy"][i] = -entropy_reward(s.entropy)
            mask, why = self._answer_tokens(text, s)
            if mask is not None:
                comps["answer_tokens"][i] = int(mask.sum())
                comps["answer_log_probability"][i] = cumulative_log_probability(s.logprobs[mask])
                comps["answer_self_certainty"][i] = self_certainty(s.kl_uniform[mask])
                comps["answer_mean_entropy"][i] = -entropy_reward(s.entropy[mask])
            if over == "final-answer" and mask is None:
                statuses.append(Status.ABSTAIN)
                messages.append(f"{self.metric} over the final-answer tokens: {why}")
                continue
            rewards[i] = _reward(self.metric, over, s, mask if mask is not None else np.zeros(0, bool))
            statuses.append(Status.OK)
            messages.append(None)
        executed = [r for r in res if r.status is Status.OK]
        # requests refused before the forward pass (empty, over the context) were not executed
        cost = Cost(judge_calls=len(executed), prompt_tokens=sum(r.prompt_tokens + len(r.logprobs) for r in executed))
        components = {k: np.asarray(v, dtype=np.float64) if k not in ("answer_tokens", "response_tokens") else v
                      for k, v in comps.items()}
        return GroupScore(g.id, rewards, statuses, components, cost, messages if any(messages) else None)

    @staticmethod
    def _answer_tokens(text: str, s: TokenScores) -> tuple[np.ndarray | None, str | None]:
        """The mask of the final answer's tokens, or why there is none."""
        span = extract_answer_span(text)
        if span is None:
            return None, "the response has no final answer (nothing for ans(y) to extract)"
        if s.offsets is None:
            return None, "the backend gave no token offsets, so the answer's tokens cannot be located"
        mask = answer_token_mask(s.offsets, span[0], span[1])
        if not mask.any():
            return None, f"no response token covers the answer {span[2]!r}"
        return mask, None


class EntropyScorer(SelfCertaintyScorer):
    """Entropy-minimisation reward: minus the mean token entropy over the final-answer tokens (App. D,
    default) or over the whole response."""

    name = "entropy"
    metric: ClassVar[Metric] = "entropy"
