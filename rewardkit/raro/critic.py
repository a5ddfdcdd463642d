"""RARO (Relativistic Adversarial Reasoning Optimization): the relativistic critic reward.

The critic sees (question, answer 1, answer 2), one expert and one policy answer in a seeded random order,
and says ``Answer 1``, ``Answer 2`` or ``tie`` (Sec. 3.3). Rewards (Sec. 3.3, Algorithm 2 lines 8 and 15):

    R_pol  = 1[critic picks the policy answer] + tau_pol  * 1[tie]     (tau_pol  = 0.6, Table 5)
    R_crit = 1[critic picks the expert answer] + tau_crit * 1[tie]     (tau_crit = 0.55, Table 5)

An unparseable critic output masks the response (status invalid), as the paper masks "formatting or
networking failures" (App. C.1). The replay buffer is in ``rewardkit.raro.replay``.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from rewardkit.answers import response_trunk
from rewardkit.backends.base import ChatRequest, Message, VerdictRequest, cost_of
from rewardkit.options import option
from rewardkit.prompts.raro import VERDICT_CHOICES, VERDICT_PREFIX, critic_user_prompt
from rewardkit.raro.replay import CriticExample, ReplayBuffer, mix_critic_batch
from rewardkit.scoring import JudgeOptions, JudgeScorer, VerdictMode
from rewardkit.types import Group, GroupScore, Status
from rewardkit.verdicts import boxed_contents, parse_answer_choice

TAU_POL = 0.6  # Table 5 (all tasks)
TAU_CRIT = 0.55  # Table 5 (Countdown, DeepMath; 0.5 for poetry)

Label = Literal["policy", "expert", "tie"]
View = Literal["answer", "final", "full"]

# ------------------------------------------------------------------------------------- pure rewards


def policy_reward(label: str | None, tau_pol: float = TAU_POL) -> float:
    """R_pol (Sec. 3.3): 1 if the critic picks the policy answer, tau_pol on a tie, 0 if it picks the expert."""
    _check_label(label)
    return 1.0 if label == "policy" else tau_pol if label == "tie" else 0.0


def critic_reward(label: str | None, tau_crit: float = TAU_CRIT) -> float:
    """R_crit (Sec. 3.3): 1 if the critic picks the expert answer, tau_crit on a tie, 0 if it picks the policy."""
    _check_label(label)
    return 1.0 if label == "expert" else tau_crit if label == "tie" else 0.0


def _check_label(label: str | None) -> None:
    if label not in ("policy", "expert", "tie"):
        raise ValueError(f"critic label must be 'policy', 'expert' or 'tie', got {label!r} (mask invalid verdicts)")


def resolve_choice(choice: str, expert_position: int) -> Label:
    """Map the critic's ``"1"``/``"2"``/``"tie"`` to expert/policy/tie given where the expert answer sat."""
    if expert_position not in (1, 2):
        raise ValueError(f"expert_position must be 1 or 2, got {expert_position!r}")
    if choice == "tie":
        return "tie"
    if choice not in ("1", "2"):
        raise ValueError(f"critic choice must be '1', '2' or 'tie', got {choice!r}")
    return "expert" if int(choice) == expert_position else "policy"


def expert_positions(n: int, seed: int, key: str) -> list[int]:
    """Seeded random slot (1 or 2) of the expert answer for ``n`` pairs; stable per (seed, key)."""
    rng = np.random.default_rng([seed, zlib.crc32(key.encode())])
    return [int(x) for x in rng.integers(1, 3, size=n)]


def expected_rewards(probs: Sequence[float], expert_position: int, tau_pol: float = TAU_POL,
                     tau_crit: float = TAU_CRIT) -> tuple[float, float]:
    """E[R_pol], E[R_crit] under verdict probabilities over (Answer 1, Answer 2, tie)."""
    p1, p2, pt = (float(x) for x in probs)
    p_exp, p_pol = (p1, p2) if expert_position == 1 else (p2, p1)
    return p_pol + tau_pol * pt, p_exp + tau_crit * pt


# ----------------------------------------------------------------------------------- critic inputs


def answer_view(text: str, view: View = "answer") -> str:
    """What the critic sees of a response: ``answer`` drops a ``<think>`` block (the paper's a, not z),
    ``final`` keeps only the last ``\\boxed{}`` content (the whole answer when nothing is boxed, e.g. a
    bare expert expression), ``full`` keeps everything."""
    if view == "full":
        return text
    answer = response_trunk(text)
    if view == "answer":
        return answer
    if view == "final":
        boxed = boxed_contents(answer)
        return boxed[-1].strip() if boxed else answer
    raise ValueError(f"unknown answer view {view!r}; use 'answer', 'final' or 'full'")


def critic_messages(question: str, answer_1: str, answer_2: str, template: str = "math") -> list[Message]:
    """Chat messages of one critic query (App. E critic input format)."""
    return [{"role": "user", "content": critic_user_prompt(question, answer_1, answer_2, template)}]


@dataclass(frozen=True)
class CriticItem:
    """A critic prompt ready for a rollout: where the expert sits and whether it came from the buffer."""

    example: CriticExample
    expert_position: int
    messages: list[Message]
    source: Literal["current", "replay"]


def critic_rollout_rewards(texts: Sequence[str], expert_positions: Sequence[int], tau_crit: float = TAU_CRIT,
                           finish_reasons: Sequence[str | None] | None = None
                           ) -> tuple[np.ndarray, list[Status], list[str | None]]:
    """R_crit of sampled critic rollouts (Algorithm 2 line 15); unparseable ones, and ones cut off for length
    (``finish_reasons``), are NaN with status invalid."""
    if len(texts) != len(expert_positions):
        raise ValueError(f"{len(texts)} critic texts for {len(expert_positions)} expert positions")
    reasons = list(finish_reasons) if finish_reasons is not None else [None] * len(texts)
    rewards, statuses, messages = [], [], []
    for text, pos, reason in zip(texts, expert_positions, reasons, strict=True):
        v = parse_answer_choice(text, reason)
        if not v.ok:
            rewards.append(math.nan)
            statuses.append(v.status)
            messages.append(v.message)
            continue
        rewards.append(critic_reward(resolve_choice(v.label, pos), tau_crit))
        statuses.append(Status.OK)
        messages.append(None)
    return np.asarray(rewards, dtype=np.float64), statuses, messages


# -------------------------------------------------------------------------------------------- scorer


@dataclass(frozen=True)
class CriticBaseOptions(JudgeOptions):
    """The options every RARO critic shares (relativistic ``critic`` and binary ``critic-binary``)."""

    max_tokens: int = option(512, "critic generation budget (generate mode)")
    temperature: float = option(1.0, "critic sampling temperature (the paper samples the critic, l ~ c)")
    view: View = option("answer", "what the critic sees of each answer: answer (drop <think>), final (the final answer only) or full")
    template: str = option("math", "critic prompt: math (the paper's) or general")
    seed: int = option(0, "seeds the expert/policy order of every pair and the critic's sampling")

    def __post_init__(self) -> None:
        super().__post_init__()
        self._at_least(1, "max_tokens")
        self._at_least(0, "temperature")


@dataclass(frozen=True)
class CriticOptions(CriticBaseOptions):
    mode: VerdictMode = option("generate", "generate samples the critic's reasoning and parses Answer 1/2/tie; logit scores the "
                                    "three verdicts in one forward pass and returns the expected reward")
    tau_pol: float = option(TAU_POL, "tie reward of the policy (Table 5: 0.6)")
    tau_crit: float = option(TAU_CRIT, "tie reward of the critic, reported as the critic_reward component (Table 5: 0.55)")
    replay_path: str | None = option(None, "optional JSON file of the replay buffer used by critic_batch")
    replay_capacity: int = option(10_000, "replay buffer size")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (0.0 <= self.tau_pol <= 1.0 and 0.0 <= self.tau_crit <= 1.0):
            raise ValueError(f"option 'tau_pol'/'tau_crit': tie rewards must lie in [0, 1] (Sec. 3.3), got "
                             f"{self.tau_pol}, {self.tau_crit}")
        self._at_least(1, "replay_capacity")


class CriticJudge(JudgeScorer):
    """What both RARO critics share (``critic`` and ``critic-binary``): the options of ``CriticBaseOptions``
    and one seeded backend call for every critic query of a batch, sampled (generate) or scored (logit)."""

    Options = CriticBaseOptions
    options: CriticBaseOptions
    verdict_choices: tuple[str, ...] = VERDICT_CHOICES  # logit mode: the verdicts scored after verdict_prefix
    verdict_prefix: str = VERDICT_PREFIX
    _batches = 0  # generate-mode batches asked so far (seeds each batch)

    def _ask(self, flat: list[list[Message]]) -> list[Any]:
        """One backend call for every query of the batch."""
        o = self.options
        if self.verdict_mode == "logit":
            reqs = [VerdictRequest(m, self.verdict_choices, self.verdict_prefix) for m in flat]
            return self.judge.verdict_probs(reqs)
        self._batches += 1
        # one seed per batch (not per request) so the backend can pack the whole batch together
        seed = o.seed * 1_000_003 + self._batches
        reqs = [ChatRequest(m, max_tokens=o.max_tokens, temperature=o.temperature, seed=seed) for m in flat]
        return self.judge.generate(reqs)


class CriticScorer(CriticJudge):
    """RARO relativistic critic: each response is compared with the group's expert answer; R_pol per response."""

    name = "critic"
    Options = CriticOptions
    options: CriticOptions

    def _setup(self) -> None:
        o = self.options
        self.replay = ReplayBuffer.open(o.replay_path, o.replay_capacity, o.seed) if o.replay_path else \
            ReplayBuffer(o.replay_capacity, o.seed)

    # ---- policy rewards

    def _score(self, groups: list[Group]) -> list[GroupScore]:
        o = self.options
        plans: list[tuple[Group, list[int], list[list[Message]]] | None] = []
        flat: list[list[Message]] = []
        for g in groups:
            if g.expert is None or not str(g.expert).strip():
                plans.append(None)
                continue
            pos = expert_positions(len(g), o.seed, g.id)
            expert = answer_view(g.expert, o.view)
            msgs = []
            for r, p in zip(g.responses, pos, strict=True):
                pol = answer_view(r, o.view)
                a1, a2 = (expert, pol) if p == 1 else (pol, expert)
                msgs.append(critic_messages(g.prompt, a1, a2, o.template))
            plans.append((g, pos, msgs))
            flat.extend(msgs)

        results = self._ask(flat) if flat else []  # one backend call for the whole batch
        out: list[GroupScore] = []
        k = 0
        for g, plan in zip(groups, plans, strict=True):
            if plan is None:
                out.append(GroupScore.failed(
                    g.id, len(g), Status.ABSTAIN,
                    f"group {g.id!r} has no expert answer (Group.expert is None): the RARO critic compares "
                    "each response with an expert answer, so it abstains",
                    stats={"has_expert": False}))
                continue
            _, pos, msgs = plan
            res = results[k:k + len(msgs)]
            k += len(msgs)
            out.append(self._group_score(g, pos, res))
        return out

    def _group_score(self, g: Group, pos: list[int], res: list[Any]) -> GroupScore:
        o = self.options
        n = len(g)
        rewards, r_crit = np.full(n, np.nan), np.full(n, np.nan)
        statuses: list[Status] = []
        messages: list[str | None] = []
        labels: list[str | None] = []
        probs: list[list[float] | None] = []
        raw: list[str | None] = []
        for i, (r, p) in enumerate(zip(res, pos, strict=True)):
            label = None
            if r.status is not Status.OK:
                statuses.append(r.status)
                messages.append(f"critic backend: {r.error or r.status.value}")
                probs.append(None)
                raw.append(None)
            elif self.verdict_mode == "logit":
                pr = np.asarray(r.probs, dtype=float)
                rewards[i], r_crit[i] = expected_rewards(pr, p, o.tau_pol, o.tau_crit)
                label = resolve_choice(("1", "2", "tie")[int(np.argmax(pr))], p)
                statuses.append(Status.OK)
                messages.append(None)
                probs.append(pr.tolist())
                raw.append(None)
            else:
                raw.append(r.text)
                probs.append(None)
                v = parse_answer_choice(r.text, r.finish_reason())
                if not v.ok:
                    statuses.append(v.status)
                    messages.append(v.message)
                else:
                    label = resolve_choice(v.label, p)
                    rewards[i] = policy_reward(label, o.tau_pol)
                    r_crit[i] = critic_reward(label, o.tau_crit)
                    statuses.append(Status.OK)
                    messages.append(None)
            labels.append(label)
        ok = [lab for lab in labels if lab is not None]
        components = {
            "critic_label": labels,
            "expert_position": pos,
            "critic_reward": r_crit,
        }
        stats = {
            "tie_rate": (sum(lab == "tie" for lab in ok) / len(ok)) if ok else math.nan,
            "fooled_rate": (sum(lab == "policy" for lab in ok) / len(ok)) if ok else math.nan,
        }
        extra: dict[str, Any] = {"critic_probs": probs} if self.verdict_mode == "logit" else {"critic_outputs": raw}
        return GroupScore(g.id, rewards, statuses, components, cost_of(res), messages, extra, stats)

    # ---- critic training batches (Algorithm 2 lines 9-12)

    def critic_batch(self, groups: Sequence[Group], size: int, step: int = 0) -> list[CriticItem]:
        """Critic prompts for one training step: Mix(R_new, R), then R <- R u R_new (saved if persisted).

        R_new are the (question, expert, policy answer) triples of ``groups`` (groups without an expert are
        skipped); the draw is seeded by (seed, step); the expert slot of each prompt is seeded too.
        """
        o = self.options
        current = [CriticExample(g.prompt, answer_view(g.expert, o.view), answer_view(r, o.view))
                   for g in groups if g.expert for r in g.responses]
        mixed = mix_critic_batch(current, self.replay, size, seed=o.seed * 1_000_003 + step)
        pos = expert_positions(len(mixed), o.seed, f"critic-batch-{step}")
        items = []
        for (ex, src), p in zip(mixed, pos, strict=True):
            a1, a2 = (ex.expert, ex.policy) if p == 1 else (ex.policy, ex.expert)
            items.append(CriticItem(ex, p, critic_messages(ex.question, a1, a2, o.template), src))
        self.replay.add(current)
        if self.replay.path is not None:
            self.replay.save()
        return items

    def critic_rewards(self, items: Sequence[CriticItem], texts: Sequence[str],
                       finish_reasons: Sequence[str | None] | None = None) -> tuple[np.ndarray, list[Status]]:
        """R_crit of the critic's rollouts on ``items`` (invalid outputs, and ones cut off for length, NaN and masked)."""
        r, s, _ = critic_rollout_rewards(texts, [it.expert_position for it in items], self.options.tau_crit, finish_reasons)
        return r, s
