"""JURY-RL's LLM-as-a-Judge baseline judging every rollout (App. D), beside the majority-only ``llm-judge``.

The App. D judge "assesses the reasoning process and the final answer of each rollout": each response goes
to the judge whole, its reasoning (a ``<think>`` block included, closed or not) and its final answer ("...
whether a given mathematical question and answer are correctly matched ... True or False"), in one batched
call for the whole batch: reward 1 for True, 0 for False. The judge sees the rollout up to the paper's
generation budget (``response_tokens`` = 3,072, Table 7's max new tokens, counted with the judge's tokenizer),
cut only where the judge's context ends (``JudgeBackend.context_length``, beside the prompt and the
judgment): a longer response is cut from the front, so its final answer stays.
The answer is extracted from the same text the judge sees: a ``<think>`` block never closed (the policy cut
off mid-reasoning) is read the same way by both, as part of the response. This is the per-rollout judge
reward of the paper's LLM-as-a-Judge baseline; ``llm-judge`` (``rewardkit.jury.proof_gate``) instead asks
the judge once per group about the majority answer alone. The judging itself is ``LLMJudgeVerifier``, shared.

A finished response without a final answer is not sent and gets 0 (the policy gave no answer). A response
cut off mid-reasoning with no final answer ("... Then maybe it's 41 or": ``rewardkit.answers.unfinished``)
abstains: a number from unfinished reasoning is no answer, so nothing is judged. A judge failure, an
unparseable judgment or an even split of ``samples`` judgments masks that response with its status.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rewardkit.answers import extract_answer_span, unfinished
from rewardkit.jury.proof_gate import LLMJudgeVerifier
from rewardkit.options import option
from rewardkit.scoring import BaseScorer, JudgeOptions
from rewardkit.types import Cost, Group, GroupScore, Status
from rewardkit.verifier import Claim, VerifyResult, verify_all


@dataclass(frozen=True)
class RolloutJudgeOptions(JudgeOptions):
    samples: int = option(1, "judgments per response, majority of them (an even split masks the response)")
    max_tokens: int = option(512, "generation budget of one judgment")
    temperature: float = option(0.0, "judge sampling temperature (at least 0.7 when samples > 1)")
    response_tokens: int = option(3072, "the most response tokens the judge is shown (JURY-RL Table 7: 3,072 new "
                                        "tokens; its tokenizer, whitespace words without one), fewer where the "
                                        "judge's context ends: a longer response is cut from the front, so the "
                                        "final answer stays")

    def __post_init__(self) -> None:
        super().__post_init__()
        self._at_least(1, "samples", "max_tokens", "response_tokens")
        self._at_least(0, "temperature")


CUT_MARK = "[... the start of the response is cut to fit the judge's budget ...]\n"
TEMPLATE_TOKENS = 32  # room left for the chat template's role markers around the judge's messages
_WORD_GAP = re.compile(r"(?<=\S)\s+(?=\S)")  # whitespace between two words: the next word starts at its end


def response_tail(text: str, budget: int, count: Callable[[Sequence[str]], list[int]], keep_from: int) -> str:
    """``text`` within ``budget`` tokens (``count``), cut from the front at a word boundary behind ``CUT_MARK``;
    never cut past the word holding ``keep_from`` (the final answer's start): a response whose answer alone is
    over the budget is kept from there. A binary search over word starts: O(log n) counts."""
    if count([text])[0] <= budget:
        return text
    starts = [m.end() for m in _WORD_GAP.finditer(text[:keep_from + 1])]  # leading whitespace is no gap
    if not starts:  # the answer stands in the first word: nothing before it to cut
        return text
    lo, hi = 0, len(starts) - 1  # the first start whose tail fits, else the last (the answer's)
    while lo < hi:
        mid = (lo + hi) // 2
        if count([CUT_MARK + text[starts[mid]:]])[0] <= budget:
            hi = mid
        else:
            lo = mid + 1
    return CUT_MARK + text[starts[lo]:]


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

    def _budget(self, problem: str) -> int:
        """Response tokens shown to the judge: ``response_tokens``, fewer where the judge's context ends (its
        messages without the response, the template's markers and the judgment's own budget take the rest)."""
        o, backend = self.options, self.verifier.backend
        context = backend.context_length()
        if context is None:
            return o.response_tokens
        prompt = sum(backend.count_tokens([m["content"] for m in self.verifier.messages(Claim(problem, ""))]))
        judgment = o.max_tokens if self.verifier.mode == "generate" else 16  # logit: "Final judgment: True"
        return max(1, min(o.response_tokens, context - prompt - TEMPLATE_TOKENS - judgment))

    def _score(self, groups: list[Group]) -> list[GroupScore]:
        spans = [[extract_answer_span(r) for r in g.responses] for g in groups]
        answers = [[sp[2] if sp else None for sp in g_spans] for g_spans in spans]
        # App. D: the judge sees the reasoning and the final answer (the whole response, cut from the front to
        # its budget), not the extracted answer alone, and the answer is read from that same text
        count = self.verifier.backend.count_tokens
        budgets = [self._budget(g.prompt) for g in groups]  # once per group: it tokenises the judge's messages
        claims = [Claim(g.prompt, response_tail(r, budget, count, sp[0]))
                  for g, g_spans, budget in zip(groups, spans, budgets, strict=True)
                  for r, sp in zip(g.responses, g_spans, strict=True) if sp is not None]
        judged = iter(verify_all(self.verifier, claims))  # one backend call for the whole batch
        out = []
        for g, ans in zip(groups, answers, strict=True):
            rewards, statuses, messages, p_true = [], [], [], []
            cost = Cost()
            for a, r in zip(ans, g.responses, strict=True):
                if a is None:
                    cut = unfinished(r)
                    rewards.append(0.0 if cut is None else math.nan)
                    statuses.append(Status.OK if cut is None else Status.ABSTAIN)
                    messages.append("no final answer in the response: not judged, reward 0" if cut is None else
                                    f"the response was cut off mid-reasoning ({cut}) and states no final answer: "
                                    "a number from unfinished reasoning is no answer; not judged, abstained")
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
