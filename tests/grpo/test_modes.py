"""The training modes: RARO's shared LLM and GAR's joint GRPO around the same loop (mechanics on a tiny
random model; GAR's judgments scripted so that they parse)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rewardkit.gar.rewards import alignment_reward, gan_reward, judgment_rewards
from rewardkit.gar.slices import SliceOptions
from rewardkit.grpo import GRPOTrainer, TrainConfig
from rewardkit.grpo.modes import GarJoint, RaroShared, critic_items, critic_rollouts, critic_step
from rewardkit.grpo.trainer import Rollouts
from rewardkit.raro.critic import CriticItem, CriticOptions, critic_messages
from rewardkit.raro.replay import CriticExample
from rewardkit.scoring import grpo_advantages
from rewardkit.types import Group

SETTINGS = dict(steps=1, prompts_per_step=1, samples_per_prompt=2, max_new_tokens=4, num_threads=1,
                tensorboard=False, lr=1e-4)
PROMPTS = [Group("a", "What is 2+3?", [], reference="5", expert=r"2+3 = 5. The answer is \boxed{5}."),
           Group("b", "What is 4+4?", [], reference="8", expert=r"4+4 = 8. The answer is \boxed{8}.")]


def test_mode_options_are_validated():
    with pytest.raises(ValueError, match="lambda_pol"):
        RaroShared(lambda_pol=-1)
    with pytest.raises(ValueError, match="lambda_crit"):
        RaroShared(lambda_crit=-0.5)
    with pytest.raises(ValueError, match="critic_samples"):
        RaroShared(critic_samples=0)
    with pytest.raises(ValueError, match="critic_batch"):
        RaroShared(critic_batch=0)
    assert RaroShared(critic_batch=1, critic_samples=1, lambda_pol=0, lambda_crit=0).options.critic_batch == 1
    with pytest.raises(ValueError, match="'mode'"):
        RaroShared(scorer=CriticOptions(mode="logit"))  # the critic's rollouts are sampled reasoning
    with pytest.raises(ValueError, match="temperature"):
        GarJoint(scorer=SliceOptions(temperature=0.0))  # GRPO on its judgments needs sampled judgments
    for bad, name in (({"lambda3": -1.0}, "lambda3"), ({"lambda4": -0.5}, "lambda4"), ({"lr": 0.0}, "lr"),
                      ({"dis_samples": 0}, "dis_samples")):
        with pytest.raises(ValueError, match=name):
            GarJoint(**bad)
    ok = GarJoint(lambda3=0.0, lambda4=0.0, lr=1e-9, dis_samples=1, scorer=SliceOptions(temperature=0.5)).options
    assert (ok.lambda3, ok.lambda4, ok.dis_samples, ok.scorer.temperature) == (0.0, 0.0, 1, 0.5)
    assert RaroShared(RaroShared.Options(lambda_crit=0.25), lambda_pol=0.75).options.lambda_crit == 0.25


def test_cli_builds_methods_with_typed_options_for_the_method_and_its_scorer():
    import typer
    from rewardkit.cli.train import build_method

    m = build_method("raro", {"lambda_pol": "0.25", "critic_samples": "3", "tau_pol": "0.5"})
    assert (m.options.lambda_pol, m.options.critic_samples, m.options.scorer.tau_pol) == (0.25, 3, 0.5)
    g = build_method("gar", {"lambda4": "0.25", "slice_tokens": "64"})
    assert (g.options.lambda4, g.options.scorer.slice_tokens) == (0.25, 64)
    with pytest.raises(typer.BadParameter, match="unknown method"):
        build_method("dpo", {})
    with pytest.raises(typer.BadParameter, match="lambda_pol"):
        build_method("raro", {"lambda_pol": "lots"})
    with pytest.raises(typer.BadParameter, match="not an option of method 'gar'"):
        build_method("gar", {"bogus": "1"})


# ------------------------------------------------------------------------------------------ RARO


def test_raro_mode_brings_app_c1_settings(tiny_model, tmp_path):
    t = GRPOTrainer(TrainConfig(model=tiny_model, out_dir=str(tmp_path), **SETTINGS), PROMPTS, modes=[RaroShared()])
    c = t.config  # App. C.1 / Table 4: no advantage or length normalisation, clip [0.2, 0.28], KL 1e-3, DAPO filter
    assert (c.advantage, c.norm, c.eps_low, c.eps_high, c.beta, c.overlong_filter) == \
        ("dr_grpo", "constant", 0.2, 0.28, 1e-3, True)


def test_raro_critic_budget_is_the_critics_own(tiny_model):
    # One budget, one name: the critic rollouts use the critic scorer's max_tokens, not a separate 128-token cap
    # that cut off 4 of 16 embedded-model critic samples; at 512 all 15 that end at all have ended (the longest at
    # 457 tokens; 1 loops past 1,024): benchmarks/results/raro_critic_budget.md.
    assert RaroShared().options.scorer.max_tokens == CriticOptions().max_tokens == 512


class _ScriptedLearner:
    """Stands in for a Learner's sampling: fixed texts and truncation flags, RARO's resolved settings."""

    def __init__(self, texts: list[str], truncated: list[bool]):
        self.texts, self.truncated = texts, truncated
        self.config = TrainConfig().resolved(RaroShared.train_settings)

    def sample(self, chats, n, seed_key, max_new_tokens=None) -> Rollouts:
        return Rollouts([[1]] * len(self.texts), [[2]] * len(self.texts), self.texts, self.truncated,
                        [i // n for i in range(len(self.texts))], max_tokens=max_new_tokens)


def test_critic_rollouts_cut_off_at_the_budget_are_filtered_out():
    items = critic_items([CriticExample("q", "expert", "policy")] * 2, step=0)
    texts = ["so... Answer 1", "Answer 2", "tie", "no verdict"]
    learner = _ScriptedLearner(texts, [True, False, False, False])
    r, m = critic_rollouts(learner, items, 2, 8, 0.55, (0, 1))
    assert r.valid.tolist() == [False, True, True, False]  # cut off (App. C.1 over-length filter); unparseable
    # the cut-off critic's "Answer 1" is no verdict (a generation stopped for length is invalid, issue 21)
    assert m["critic_truncated_fraction"] == 0.25 and m["critic_ok_fraction"] == 0.5
    assert r.advantages[0] == 0.0 and r.advantages[3] == 0.0 and r.max_tokens == 8


def _pairs(n: int) -> list[CriticExample]:
    return [CriticExample(f"question {i}", f"EXPERT-{i}", f"POLICY-{i}") for i in range(n)]


def test_critic_items_put_the_expert_answer_in_the_slot_they_name():
    # Algorithm 2 line 14: the critic sees (a^E, a^P) in a seeded order; R_crit (line 15) is read against the slot
    # recorded here, so the expert answer must stand exactly where expert_position says
    items = critic_items(_pairs(16), step=3, seed=7, template="general")
    assert {it.expert_position for it in items} == {1, 2}  # both orders occur in 16 draws
    for i, it in enumerate(items):
        text = it.messages[-1]["content"]
        assert it.example.expert == f"EXPERT-{i}" and it.source == "current" and f"question {i}" in text
        assert (text.index(f"EXPERT-{i}") < text.index(f"POLICY-{i}")) == (it.expert_position == 1)
        pair = (f"EXPERT-{i}", f"POLICY-{i}")[:: 1 if it.expert_position == 1 else -1]
        assert it.messages == critic_messages(f"question {i}", *pair, "general")  # the template asked for
    again = [it.expert_position for it in critic_items(_pairs(16), step=3, seed=7)]
    assert again == [it.expert_position for it in items]  # seeded by (seed, step) only
    assert again != [it.expert_position for it in critic_items(_pairs(16), step=4, seed=7)]
    assert again != [it.expert_position for it in critic_items(_pairs(16), step=3, seed=8)]
    default = [it.expert_position for it in critic_items(_pairs(16), step=3)]  # no seed: the critic's default one
    assert default == [it.expert_position for it in critic_items(_pairs(16), step=3, seed=CriticOptions().seed)]


def _items(positions: list[int]) -> list[CriticItem]:
    """Critic prompts with the expert in the given slots."""
    return [CriticItem(ex, p, critic_messages(ex.question, ex.expert, ex.policy), "current")
            for ex, p in zip(_pairs(len(positions)), positions, strict=True)]


def test_critic_rollouts_reward_the_expert_pick_one_a_tie_tau_crit_and_the_policy_pick_zero():
    # Algorithm 2 line 15: R_crit = 1[l is expert] + tau_crit 1[l = tie]. Expert in slot 1 for the first prompt,
    # slot 2 for the second; three samples each. By hand, tau_crit = 0.3: rewards [1, 0, 0.3] and [0.3, 0, 1];
    # RARO's advantage is Dr. GRPO's r - mean(group) (App. C.1, no std): [0.567, -0.433, -0.133] and
    # [-0.133, -0.433, 0.567]
    texts = ["Answer 1", "Answer 2", "tie", "tie", "Answer 1", "Answer 2"]
    r, m = critic_rollouts(_ScriptedLearner(texts, [False] * 6), _items([1, 2]), 3, 16, 0.3, (0, 1))
    np.testing.assert_allclose(r.advantages, [0.56667, -0.43333, -0.13333, -0.13333, -0.43333, 0.56667], atol=1e-5)
    assert r.valid.all() and r.group == [0, 0, 0, 1, 1, 1]
    assert m == pytest.approx({"critic_rollouts": 6, "critic_ok_fraction": 1.0, "critic_truncated_fraction": 0.0,
                               "critic_reward_mean": 2.6 / 6})
    # nothing read at all: no mean reward to report (NaN, not 0)
    _, m = critic_rollouts(_ScriptedLearner(["?"] * 2, [False] * 2), _items([1]), 2, 16, 0.3, (0, 1))
    assert m["critic_ok_fraction"] == 0.0 and math.isnan(m["critic_reward_mean"])


class _RecordingLearner(_ScriptedLearner):
    """A scripted learner (its texts repeated as needed) that records what it was asked to sample and the
    objectives of its update."""

    def __init__(self, texts: list[str], truncated: list[bool], samples_per_prompt: int = 4):
        super().__init__(texts, truncated)
        self.config = TrainConfig(samples_per_prompt=samples_per_prompt).resolved(RaroShared.train_settings)
        self.asked: list[tuple] = []
        self.updated: list[list[Rollouts]] = []

    def sample(self, chats, n, seed_key, max_new_tokens=None) -> Rollouts:
        self.asked.append((chats, n, seed_key, max_new_tokens))
        rows = range(len(chats) * n)  # the scripted texts and flags, repeated as far as the request needs
        return Rollouts([[1]] * len(rows), [[2]] * len(rows), [self.texts[i % len(self.texts)] for i in rows],
                        [self.truncated[i % len(self.truncated)] for i in rows], [i // n for i in rows],
                        max_tokens=max_new_tokens)

    def update(self, parts: list[Rollouts]) -> dict[str, float]:
        self.updated.append(parts)
        return {"loss": 0.125}


def test_critic_step_rewards_with_the_options_tau_crit_and_budget():
    # the critic side alone (lambda_pol = 0) with tau_crit = 0.2: the first pair's critic picks the expert once
    # (R_crit 1) and ties once (0.2), so its Dr. GRPO advantages are +-0.4; the second pair ties twice (0, 0)
    opts = CriticOptions(tau_crit=0.2, max_tokens=64, seed=5, template="general")
    items = critic_items(_pairs(2), 9, seed=5, template="general")
    learner = _RecordingLearner([f"Answer {items[0].expert_position}", "tie", "tie", "tie"], [False] * 4)
    m = critic_step(learner, _pairs(2), step=9, samples=2, options=opts)
    (chats, n, seed_key, budget), = learner.asked
    assert chats == [it.messages for it in items] and (n, budget) == (2, 64) and seed_key[0] == 9
    (roll,), = learner.updated
    np.testing.assert_allclose(roll.advantages, [0.4, -0.4, 0.0, 0.0], atol=1e-12)
    assert m["loss"] == 0.125 and m["critic_rollouts"] == 4 and m["critic_reward_mean"] == pytest.approx(1.6 / 4)
    # no options: the paper's tau_crit = 0.55 (Table 5) and the critic's 512-token budget
    learner = _RecordingLearner([f"Answer {3 - critic_items(_pairs(1), 0)[0].expert_position}", "tie"], [False] * 2)
    critic_step(learner, _pairs(1), step=0, samples=2)
    np.testing.assert_allclose(learner.updated[0][0].advantages, [-0.275, 0.275], atol=1e-12)
    assert learner.asked[0][3] == 512
    # the step's own expert slots (12 pairs), and 4 samples per pair unless told
    learner = _RecordingLearner(["tie"], [False])
    critic_step(learner, _pairs(12), step=5)
    assert learner.asked[0][0] == [it.messages for it in critic_items(_pairs(12), 5)] and learner.asked[0][1] == 4


def test_raro_weights_its_two_objectives_by_lambda_pol_and_lambda_crit():
    # Algorithm 2 line 17: lambda_pol J_pol + lambda_crit J_crit (Table 5, DeepMath: 1/9 and 8/9). The policy is
    # its own critic (c_theta = pi_theta); the critic rollouts are Mix(R_new, R) of critic_batch prompts, each one
    # GRPO group of critic_samples
    from types import SimpleNamespace

    learner = _RecordingLearner(["tie", "Answer 1", "Answer 2"] * 2, [False] * 6, samples_per_prompt=3)
    trainer = SimpleNamespace(policy=object(), config=learner.config, learner=learner)
    mode = RaroShared(lambda_pol=1 / 9, lambda_crit=8 / 9, critic_batch=2,
                      scorer=CriticOptions(max_tokens=32, tau_crit=0.3))
    mode.attach(trainer)
    assert trainer.policy_weight == 1 / 9 and trainer.scorer is mode.critic and mode.critic.options.judge is trainer.policy
    groups = [Group("a", "q", ["x", "y", "z"], expert="e")]
    (roll,), m = mode.extra_rollouts(trainer, groups, [], step=2)
    assert roll.weight == 8 / 9 and len(roll) == 6 and m["critic_rollouts"] == 6 and m["replay_size"] == 3
    # each group: a tie (tau_crit 0.3), the expert's pick (1) and the policy's (0): the tie's advantage 0.3 - 1.3 / 3
    np.testing.assert_allclose(roll.advantages[[0, 3]], [0.3 - 1.3 / 3] * 2, atol=1e-12)
    (chats, n, key, budget), = learner.asked
    assert len(chats) == 2 and n == 3 and budget == 32  # critic_samples unset: the policy's group size
    assert key[0] == 2 and key != (2, 0)  # the step's own seed, apart from the policy's rollouts of the step
    mode = RaroShared(critic_samples=2, scorer=CriticOptions(max_tokens=32))
    mode.attach(trainer)
    learner.asked.clear()
    (roll,), _ = mode.extra_rollouts(trainer, groups, [], step=0)
    assert [len(a[0]) for a in learner.asked] == [3] and learner.asked[0][1] == 2  # critic_batch unset: 1 per rollout
    # the expert's slots are drawn again each step (16 critic prompts: two steps never give the same order)
    mode = RaroShared(critic_batch=16, critic_samples=1)
    mode.attach(trainer)
    slots = []
    for step in (0, 1):
        learner.asked.clear()
        mode.extra_rollouts(trainer, [Group("c", "q", [f"POLICY-{i}" for i in range(16)], expert="EXPERT")], [], step)
        slots.append([c[-1]["content"].index("EXPERT") < c[-1]["content"].index("POLICY") for c in learner.asked[0][0]])
    assert slots[0] != slots[1]
    mode = RaroShared()  # no expert answer, an empty buffer: no critic prompt, no critic objective
    mode.attach(trainer)
    assert mode.extra_rollouts(trainer, [Group("b", "q", ["x"])], [], step=1) == ([], {"critic_rollouts": 0})


@pytest.mark.slow
def test_raro_shared_llm_step_trains_policy_and_critic_rollouts_together(tiny_model, tmp_path):
    opts = dict(critic_batch=2, critic_samples=2, scorer=CriticOptions(max_tokens=4))
    mode = RaroShared(lambda_pol=1 / 3, lambda_crit=2 / 3, **opts)
    cfg = TrainConfig(model=tiny_model, out_dir=str(tmp_path / "run"), **SETTINGS)
    trainer = GRPOTrainer(cfg, PROMPTS, modes=[mode])
    assert trainer.scorer is mode.critic and mode.critic.judge is trainer.policy  # one shared LLM
    (row,) = trainer.train()
    assert row["critic_rollouts"] == 4  # 2 critic prompts x 2 samples in the same batch
    assert row["replay_size"] == 2  # the step's 1 x 2 (question, expert, policy answer) triples
    assert row["critic_truncated_fraction"] == 1.0  # a random 4-token critic never finishes: all filtered
    assert 0 <= row["ok_fraction"] <= 1 and row["judge_calls"] > 0
    # resuming restores the replay buffer from the checkpoint exactly
    again = GRPOTrainer(cfg, PROMPTS, modes=[RaroShared(**opts)])
    assert again.step == 1 and again.modes[0].critic.replay.state() == mode.critic.replay.state()


# ------------------------------------------------------------------------------------------- GAR


def test_per_judgment_r_dis_averages_to_the_papers_r_d_and_r_a():
    # two reference slices (YES, NO) and three generated ones: correct-trace YES, wrong-trace NO, unknown YES
    scores, ref = [1.0, 0.0, 1.0, 0.0, 1.0], [True, True, False, False, False]
    correct = [None, None, True, False, None]
    r = judgment_rewards(scores, ref, correct, lambda3=1.0, lambda4=0.0)
    assert r[:2].mean() + r[2:].mean() == pytest.approx(gan_reward(scores[:2], scores[2:]))
    r_a = judgment_rewards(scores, ref, correct, lambda3=0.0, lambda4=1.0)
    assert r_a[2:4].mean() == pytest.approx(alignment_reward([[1.0], [0.0]], [True, False]))
    assert r_a[4] == 0.0 and math.isnan(judgment_rewards([None], [False], [True])[0])  # unparseable: masked


def test_gar_generated_slices_carry_their_traces_correctness_and_context():
    # the discriminator's generated slices, in the scorer's order, each with its trace's exact-match correctness
    # (R^a needs it; NaN or no R^m: unknown) and, with context on, the trace before it for every slice but the first
    from rewardkit.gar.slices import SliceItem
    from rewardkit.types import GroupScore, Status

    resp = ["First step. Second step.", "Only step.", "Third try. Fourth step."]
    g = Group("a", "problem", resp)
    sl = [[{"text": "First step.", "start": 0}, {"text": "Second step.", "start": 12}], [{"text": "Only step.", "start": 0}],
          [{"text": "Third try.", "start": 0}, {"text": "Fourth step.", "start": 11}]]
    score = GroupScore("a", np.zeros(3), [Status.OK] * 3, {"exact_match": [1.0, 0.0, math.nan]}, extra={"slices": sl})
    items, correct = GarJoint(scorer=SliceOptions(temperature=1.0, context=True))._generated([g], [score])
    assert items == [SliceItem("problem", "First step.", ""), SliceItem("problem", "Second step.", "First step. "),
                     SliceItem("problem", "Only step.", ""), SliceItem("problem", "Third try.", ""),
                     SliceItem("problem", "Fourth step.", "Third try. ")]
    assert correct == [True, True, False, None, None]
    items, correct = GarJoint()._generated([g], [GroupScore("a", np.zeros(3), [Status.OK] * 3, {}, extra={"slices": sl})])
    assert [it.context for it in items] == [""] * 5 and correct == [None] * 5  # no context; no R^m: unknown
    assert GarJoint()._generated([g], [GroupScore("a", np.zeros(3), [Status.OK] * 3, {})]) == ([], [])  # no slices


def test_gar_reference_slices_are_the_expert_solutions_slices_drawn_per_step():
    # as many reference slices as generated ones: all of them when there are fewer, else a seeded draw that keeps
    # their order and changes with the step; with context on each one after the first shows the solution before it
    import dataclasses
    from types import SimpleNamespace

    from rewardkit.gar.slices import SliceItem, SliceScorer
    from rewardkit.grpo.modes import SampledJudge

    words = SimpleNamespace(model_id="words", count_tokens=lambda texts: [len(t.split()) for t in texts])
    learner = SimpleNamespace(backend=words, config=TrainConfig(seed=3))
    opts = SliceOptions(temperature=1.0, context=True, slice_tokens=4, min_slice_tokens=1)
    mode = GarJoint(scorer=opts)
    mode.learner, mode.slicer = learner, SliceScorer(dataclasses.replace(opts, judge=SampledJudge(learner, 1)))
    expert = "One two three four. Five six seven eight. Nine ten eleven twelve. Thirteen fourteen."
    groups = [Group("a", "problem", [], expert=expert), Group("b", "other", [])]  # the second has no expert
    every = mode._reference(groups, 10, step=0)
    starts = [expert.index(w) for w in ("One", "Five", "Nine", "Thirteen")]
    assert every == [SliceItem("problem", expert[a:b], expert[:a] if j else "")
                     for j, (a, b) in enumerate(zip(starts, starts[1:] + [len(expert)]))]
    draws = [mode._reference(groups, 2, step) for step in range(6)]
    assert all(len(d) == 2 and d[0] != d[1] and every.index(d[0]) < every.index(d[1]) for d in draws)
    assert draws[0] == mode._reference(groups, 2, 0) and len({str(d) for d in draws}) > 1
    mode.options = dataclasses.replace(mode.options, scorer=dataclasses.replace(opts, context=False))
    assert [it.context for it in mode._reference(groups, 10, step=0)] == [""] * 4  # context off: none


def _scripted_sample(learner, calls: list[int], keys: list | None = None, last: tuple[str, bool] | None = None):
    """Judgments that parse: **NO** first for a slice saying 'wrong', else **YES**; the other verdict second
    (``last``: the last judgment of each slice is this text instead, cut off at the budget or not). Records the
    number of chats of each call and, given ``keys``, each call's seed key."""
    tok = learner.tokenizer

    def sample(chats, n, seed_key, max_new_tokens=None) -> Rollouts:
        calls.append(len(chats))
        if keys is not None:
            keys.append(seed_key)
        r = Rollouts([], [], [], [], [], max_tokens=max_new_tokens)
        for i, chat in enumerate(chats):
            first = "NO" if "wrong" in chat[-1]["content"] else "YES"
            prompt = list(tok.apply_chat_template(chat, add_generation_prompt=True)["input_ids"])
            for j in range(n):
                v = first if j == 0 else {"YES": "NO", "NO": "YES"}[first]
                text, cut = (f"Checked.\n**{v}** Brief.", False) if last is None or j < n - 1 else last
                r.prompt_ids.append(prompt)
                r.completion_ids.append(tok(text).input_ids + [tok.eos_token_id])
                r.texts.append(text)
                r.truncated.append(cut)
                r.group.append(i)
        return r
    return sample


GAR_GROUPS = [Group("a", PROMPTS[0].prompt, [r"2+3 = 5. The answer is \boxed{5}.",
                                             r"2+3 = 6, which is wrong. The answer is \boxed{6}."],
                    reference="5", expert=PROMPTS[0].expert)]


def _gar(tiny_model: str, tmp_path, **options) -> tuple[GarJoint, GRPOTrainer, list[int]]:
    """A GAR joint trainer on the tiny model whose discriminator samples scripted judgments (calls recorded)."""
    mode = GarJoint(discriminator=tiny_model, **{"lr": 1e-2, **options})
    trainer = GRPOTrainer(TrainConfig(model=tiny_model, out_dir=str(tmp_path / "run"), **SETTINGS), PROMPTS[:1],
                          modes=[mode])
    calls: list[int] = []
    mode.learner.sample = _scripted_sample(mode.learner, calls)
    return mode, trainer, calls


@pytest.mark.slow
def test_gar_discriminator_is_its_own_model_trained_with_its_own_settings(tiny_model, tmp_path):
    # sec. 3 / 4.1: a second model (stage 1's), its own learning rate, judgments sampled at the scorer's
    # temperature and never over-length filtered (capped at K on purpose), whatever the reasoner's settings; GRPO
    # samples dis_samples judgments per slice (one group), the expected variant one bare verdict
    import shutil

    other = str(shutil.copytree(tiny_model, tmp_path / "discriminator"))
    cfg = TrainConfig(model=tiny_model, out_dir=str(tmp_path / "run"), overlong_filter=True, **SETTINGS)
    mode = GarJoint(discriminator=other, lr=1e-3, dis_samples=3, scorer=SliceOptions(temperature=0.7, max_tokens=16))
    trainer = GRPOTrainer(cfg, PROMPTS[:1], modes=[mode])
    c = mode.learner.config
    assert (c.model, c.lr, c.temperature, c.overlong_filter) == (other, 1e-3, 0.7, False)
    assert trainer.config.overlong_filter is True and trainer.config.lr == 1e-4 and mode.judge.n == 3
    expected = GarJoint(discriminator=other, dis_update="expected", dis_samples=3)
    GRPOTrainer(dataclasses.replace(cfg, out_dir=str(tmp_path / "run2")), PROMPTS[:1], modes=[expected])
    assert expected.judge.n == 1


@pytest.mark.slow
def test_gar_reasoner_gets_binary_r_s_and_the_discriminator_learns_from_its_own_judgments(tiny_model, tmp_path):
    mode, trainer, calls = _gar(tiny_model, tmp_path, m_d="verdict")
    assert trainer.scorer is mode.slicer and mode.learner.model is not trainer.model  # a second model
    groups = GAR_GROUPS
    (score,) = trainer.scorer.score(groups)
    # R^rea = R^m + R^s with R^s the mean of binary r^s (sec. 3): exactly 1 + 1 and 0 + 0, no soft P(YES)
    assert score.rewards.tolist() == [2.0, 0.0] and calls == [2]  # one sampled call for both slices
    seen: list = []
    update = mode.learner.update
    mode.learner.update = lambda parts: seen.append(parts) or update(parts)
    before = next(mode.learner.model.parameters()).detach().clone()
    calls.clear()
    m = mode.after_step(trainer, groups, [score], step=0)
    assert calls == [1]  # only the reference slice was sampled: the generated ones reuse the scoring judgments
    assert m["dis_slices"] == 3 and m["dis_ref_yes"] == 0.5 and m["dis_gen_ok_fraction"] == 1.0
    (ref, gen), = seen  # two objectives, R^d's two expectations, each averaged on its own
    assert ref.texts == ["Checked.\n**YES** Brief.", "Checked.\n**NO** Brief."] and ref.weight == gen.weight == 1.0
    assert gen.texts[::2] == ["Checked.\n**YES** Brief.", "Checked.\n**NO** Brief."]  # the scorer's first judgments
    # m_d=verdict: R^d = E_ref log M_d + E_gen log(1 - M_d) with M_d the hard verdict: YES is the better judgment
    # of the expert's slice, NO of each generated one (the alignment term does not outweigh log eps)
    assert ref.advantages[0] > 0 > ref.advantages[1]
    assert gen.advantages[1] > 0 > gen.advantages[0] and gen.advantages[2] > 0 > gen.advantages[3]
    assert not torch.equal(before, next(mode.learner.model.parameters()).detach())  # and a step was taken


def test_with_probabilities_r_a_moves_the_advantage_at_the_papers_lambda4():
    """Sec. 3 with M_d a probability: two judgments of a correct trace's generated slice, M_d = 0.5 after each
    analysis. R^d alone cannot tell them apart (log 0.5 both); R^a adds lambda4 * 1 to the YES only, so YES
    scores log 0.5 + 0.5 = -0.193 and NO log 0.5 = -0.693 (by hand), and YES takes the positive advantage."""
    r = judgment_rewards([1.0, 0.0], [False, False], [True, True], 1.0, 0.5, p_real=[0.5, 0.5])
    np.testing.assert_allclose(r, [-0.19314718, -0.69314718], atol=1e-8)
    a = grpo_advantages(r.reshape(1, -1))[0]
    assert a[0] > 0 > a[1]
    # a wrong trace: NO agrees with the answer, so NO takes it
    a = grpo_advantages(judgment_rewards([1.0, 0.0], [False, False], [False, False], 1.0, 0.5,
                                         p_real=[0.5, 0.5]).reshape(1, -1))[0]
    assert a[1] > 0 > a[0]
    # and R^d moves it too: of two NO judgments, the one whose analysis left P(YES) lower (0.2 < 0.6) is better
    a = grpo_advantages(judgment_rewards([0.0, 0.0], [False, False], [None, None], 1.0, 0.5,
                                         p_real=[0.2, 0.6]).reshape(1, -1))[0]
    assert a[0] > 0 > a[1]


@settings(max_examples=300, deadline=None)
@given(st.floats(0.001, 0.999), st.floats(0.001, 0.999), st.booleans())
def test_with_probabilities_r_a_reorders_a_yes_and_a_no_whose_r_d_differ_by_less_than_lambda4(p_yes, p_no, correct):
    """A YES and a NO judgment of one generated slice, M_d = p after each one's analysis: R^d alone ranks them by
    log(1 - p) (sec. 3); R^a adds lambda4 = 0.5 to the one agreeing with the answer, so the ranking flips
    exactly when the other one led by less than 0.5 (never with hard verdicts, whose gap is 13.8)."""
    def adv(lambda4: float) -> np.ndarray:
        r = judgment_rewards([1.0, 0.0], [False, False], [correct, correct], 1.0, lambda4, p_real=[p_yes, p_no])
        return grpo_advantages(r.reshape(1, -1))[0]

    d_yes, d_no = math.log1p(-p_yes), math.log1p(-p_no)  # log(1 - M_d) of each
    lead = d_no - d_yes if correct else d_yes - d_no  # R^d's lead of the judgment R^a does not credit
    assume(abs(lead) > 1e-6 and abs(lead - 0.5) > 1e-6)
    flips = bool(np.sign(adv(0.5)[0]) != np.sign(adv(0.0)[0]))
    assert flips == (0 < lead < 0.5)


@pytest.mark.slow
def test_gar_probability_m_d_is_read_where_each_judgment_wrote_its_verdict(tiny_model, tmp_path):
    # m_d=probability (the default): the scripted judgments of a slice share their analysis ("Checked.\n**"), so
    # they share M_d and R^d gives no advantage (the reference slice's judgments: 0, 0); R^a then decides the
    # generated ones: YES on the correct trace's slice, NO on the wrong trace's slice
    mode, trainer, _ = _gar(tiny_model, tmp_path)
    assert mode.options.m_d == "probability"
    seen: list = []
    mode.learner.update = lambda parts: seen.append(parts) or {}
    scores = trainer.scorer.score(GAR_GROUPS)
    m = mode.after_step(trainer, GAR_GROUPS, scores, step=0)
    (ref, gen), = seen
    assert ref.advantages.tolist() == [0.0, 0.0]
    assert gen.advantages[0] > 0 > gen.advantages[1] and gen.advantages[2] > 0 > gen.advantages[3]
    # M_d is the discriminator's P(YES) after the judgment's own analysis, asked of the slice it judged: the
    # reference slice (the expert's) and the two generated ones (the scorer's slices of each response)
    from rewardkit.backends.base import VerdictRequest
    from rewardkit.prompts.gar import VERDICT_CHOICES, discriminator_messages

    def p_yes(text: str) -> float:
        msgs = discriminator_messages(GAR_GROUPS[0].prompt, text, "")
        return mode.learner.backend.verdict_probs([VerdictRequest(msgs, VERDICT_CHOICES, "Checked.\n**")])[0].probs[0]

    gen_texts = [sl["text"] for per_resp in scores[0].extra["slices"] for sl in per_resp]
    assert len(gen_texts) == 2 and m["dis_ref_p_yes"] == pytest.approx(p_yes(PROMPTS[0].expert), rel=1e-6)
    assert m["dis_gen_p_yes"] == pytest.approx(np.mean([p_yes(t) for t in gen_texts]), rel=1e-6)


@pytest.mark.slow
def test_gar_probability_m_d_differs_between_analyses(tiny_model, tmp_path):
    # two judgments of one reference slice with different analyses: each one's R^d is log of the model's own
    # P(YES) where its verdict stands, so the one whose analysis makes YES likelier takes the positive advantage
    from rewardkit.backends.base import VerdictRequest
    from rewardkit.prompts.gar import VERDICT_CHOICES, discriminator_messages

    mode, trainer, _ = _gar(tiny_model, tmp_path, lambda4=0.0)
    texts = ["The steps check out.\n**YES** Fine.", "Hmm, 2+3 is not 6.\n**YES** Fine."]
    tok = mode.learner.tokenizer

    def sample(chats, n, seed_key, max_new_tokens=None) -> Rollouts:
        r = Rollouts([], [], [], [], [], max_tokens=max_new_tokens)
        for i, chat in enumerate(chats):
            prompt = list(tok.apply_chat_template(chat, add_generation_prompt=True)["input_ids"])
            for j in range(n):
                r.prompt_ids.append(prompt)
                r.completion_ids.append(tok(texts[j]).input_ids + [tok.eos_token_id])
                r.texts.append(texts[j])
                r.truncated.append(False)
                r.group.append(i)
        return r

    mode.learner.sample = sample
    seen: list = []
    mode.learner.update = lambda parts: seen.append(parts) or {}
    mode.after_step(trainer, GAR_GROUPS, trainer.scorer.score(GAR_GROUPS), step=0)
    (ref, _), = seen
    sl = mode._reference(GAR_GROUPS, 1, 0)[0]
    msgs = discriminator_messages(sl.problem, sl.text, sl.context)
    p = [mode.learner.backend.verdict_probs([VerdictRequest(msgs, VERDICT_CHOICES, t.split("**")[0] + "**")])[0]
         .probs[0] for t in texts]
    assert p[0] != p[1] and np.sign(ref.advantages[0] - ref.advantages[1]) == np.sign(p[0] - p[1])


@pytest.mark.slow
def test_gar_alignment_reward_alone_follows_the_final_answer(tiny_model, tmp_path):
    # lambda3 = 0: R^a alone. On the correct trace's slice **YES** agrees with the answer, on the wrong
    # trace's slice **NO** does; the expert's slice has no R^a term, so no advantage.
    mode, trainer, _ = _gar(tiny_model, tmp_path, lambda3=0.0, lambda4=1.0)
    groups = GAR_GROUPS
    seen: list = []
    mode.learner.update = lambda parts: seen.append(parts) or {}
    mode.after_step(trainer, groups, trainer.scorer.score(groups), step=0)
    (ref, gen), = seen
    assert ref.advantages.tolist() == [0.0, 0.0]
    assert gen.advantages[0] > 0 > gen.advantages[1] and gen.advantages[2] > 0 > gen.advantages[3]


@pytest.mark.parametrize("last", [("Checked.\n**YES**", True), ("Checked, no verdict.", False)])
@pytest.mark.slow
def test_gar_judgments_cut_off_or_unread_are_masked_not_counted_as_no(tiny_model, tmp_path, last):
    # the last of each slice's judgments is cut off at the budget right after its verdict, before any explanation
    # (sec. 4.3 keeps a verdict only when the cut falls in the explanation: this one may be incomplete), or has no
    # verdict at all: masked (no advantage, not learnt from), never a **NO** (r^s = 0)
    mode, trainer, _ = _gar(tiny_model, tmp_path, m_d="verdict", lambda3=0.0, lambda4=1.0, dis_samples=3)
    mode.learner.sample = _scripted_sample(mode.learner, [], last=last)
    seen: list = []
    mode.learner.update = lambda parts: seen.append(parts) or {}
    m = mode.after_step(trainer, GAR_GROUPS, trainer.scorer.score(GAR_GROUPS), step=0)
    (ref, gen), = seen
    assert ref.valid.tolist() == [True, True, False] and gen.valid.tolist() == [True, True, False] * 2
    assert ref.advantages[2] == gen.advantages[2] == gen.advantages[5] == 0.0
    assert m["dis_ref_ok_fraction"] == m["dis_gen_ok_fraction"] == pytest.approx(2 / 3)
    # R^a alone (lambda3 = 0, lambda4 = 1): of the read generated judgments, the correct trace's YES and the wrong
    # trace's NO agree with the answer (1 each), the other two do not (0): mean 0.5; the reference has no R^a
    assert m["dis_gen_reward"] == pytest.approx(0.5) and m["dis_ref_reward"] == 0.0
    assert m["dis_gen_yes"] == pytest.approx(2 / 6) and m["dis_ref_yes"] == pytest.approx(1 / 3)


@pytest.mark.slow
def test_gar_discriminator_judgments_draw_fresh_seeds_and_reference_slices_each_step(tiny_model, tmp_path):
    # logit-mode scoring samples no judgments, so the step samples both sets itself: the generated slices' and
    # the reference slices' judgments come from different seeds, and new ones each step; with more reference
    # slices than generated ones (the expert solution has more slices) a seeded draw per step picks them
    scorer = SliceOptions(mode="logit", temperature=1.0, slice_tokens=4, min_slice_tokens=1)
    mode, trainer, calls = _gar(tiny_model, tmp_path, scorer=scorer)
    keys: list = []
    chats: list = []
    sample = _scripted_sample(mode.learner, calls, keys)
    mode.learner.sample = lambda c, n, k, t=None: chats.append(c) or sample(c, n, k, t)
    mode.learner.update = lambda parts: {}
    groups = [Group("a", PROMPTS[0].prompt, ["2+3 = 5.", "2+3 = 6, wrong."],
                    expert="2 plus 3 is 5. Check: 5 - 3 = 2. So the sum is 5. The answer is 5.")]
    n_gen = sum(len(mode.slicer.slices(r)) for r in groups[0].responses)
    assert len(mode.slicer.slices(groups[0].expert)) > n_gen
    drawn = []
    for step in range(4):
        scores = trainer.scorer.score(groups)
        mode.after_step(trainer, groups, scores, step=step)
        drawn.append(str(chats[-1]))
    assert len(keys) == 8 and keys[0] != keys[1] and keys[2] != keys[3]  # generated vs reference, each step
    assert len({k for k in keys[0::2]}) == 4 and len({k for k in keys[1::2]}) == 4  # new seeds each step
    assert calls == [n_gen, n_gen] * 4 and len(set(drawn)) > 1  # as many reference slices, drawn again each step


@pytest.mark.slow
def test_gar_step_without_reference_or_generated_slices_is_skipped(tiny_model, tmp_path):
    # R^d needs both: no expert solution (no reference slice) or no generated slice (empty responses): no update
    mode, trainer, _ = _gar(tiny_model, tmp_path)
    mode.learner.update = lambda parts: pytest.fail("no discriminator step without both sets")
    no_expert = [Group("a", PROMPTS[0].prompt, GAR_GROUPS[0].responses, reference="5")]
    assert mode.after_step(trainer, no_expert, trainer.scorer.score(no_expert), step=0) == {"dis_skipped": 1.0}
    empty = [Group("a", PROMPTS[0].prompt, ["", ""], reference="5", expert=PROMPTS[0].expert)]
    assert mode.after_step(trainer, empty, trainer.scorer.score(empty), step=0) == {"dis_skipped": 1.0}


@pytest.mark.slow
def test_gar_joint_step_runs_and_checkpoints_the_discriminator(tiny_model, tmp_path):
    mode = GarJoint(discriminator=tiny_model, lr=1e-2, scorer=SliceOptions(temperature=1.0, max_tokens=4))
    cfg = TrainConfig(model=tiny_model, out_dir=str(tmp_path / "run"), **SETTINGS)
    trainer = GRPOTrainer(cfg, PROMPTS, modes=[mode])
    calls: list[int] = []
    mode.learner.sample = _scripted_sample(mode.learner, calls)
    before = next(mode.learner.model.parameters()).detach().clone()
    (row,) = trainer.train()
    assert row["dis_slices"] >= 2 and np.isfinite(row["dis_loss"])
    after = next(mode.learner.model.parameters()).detach().clone()
    assert not torch.equal(before, after)  # the discriminator was trained
    again = GarJoint(discriminator=tiny_model, lr=1e-2, scorer=SliceOptions(temperature=1.0, max_tokens=4))
    GRPOTrainer(cfg, PROMPTS, modes=[again])
    assert torch.equal(next(again.learner.model.parameters()).detach(), after)  # restored from the checkpoint


class _TokenLearner:
    """Scripted sampling with prompts and completions of known token counts: prompt i has i + 2 tokens, sample j of
    it j + 1 tokens, the last sample of each prompt cut off at the budget."""

    def __init__(self):
        from types import SimpleNamespace

        self.backend = SimpleNamespace(model_id="scripted")
        self.asked: list[tuple] = []

    def sample(self, chats, n, seed_key, max_new_tokens=None) -> Rollouts:
        self.asked.append((len(chats), n, seed_key, max_new_tokens))
        rows = [(i, j) for i in range(len(chats)) for j in range(n)]
        return Rollouts([[7] * (i + 2) for i, _ in rows], [[8] * (j + 1) for _, j in rows],
                        [f"judgment {j} of {chats[i][-1]['content']}" for i, j in rows], [j == n - 1 for _, j in rows],
                        [i for i, _ in rows], max_tokens=max_new_tokens)


def test_sampled_judge_reports_each_requests_own_judgments_and_token_counts():
    # the scorer reads texts[0] of each request: each request gets its own n judgments, its prompt's token count
    # and the sum of its judgments' tokens (2 x 3 judgments: 1 + 2 + 3 = 6 tokens each), its finish reasons
    from rewardkit.backends.base import ChatRequest
    from rewardkit.grpo.modes import SampledJudge

    learner = _TokenLearner()
    judge = SampledJudge(learner, n=3)
    reqs = [ChatRequest([{"role": "user", "content": f"slice {i}"}], max_tokens=m) for i, m in enumerate((5, 9))]
    out = judge.generate(reqs)
    assert [c.texts for c in out] == [[f"judgment {j} of slice {i}" for j in range(3)] for i in range(2)]
    assert [(c.prompt_tokens, c.completion_tokens) for c in out] == [(2, 6), (3, 6)]
    assert [c.finish_reasons for c in out] == [["stop", "stop", "length"]] * 2
    assert learner.asked[0][:2] == (2, 3) and learner.asked[0][3] == 9  # the longest request's budget
    judge.generate(reqs[:1])
    assert learner.asked[1][2] != learner.asked[0][2]  # a new seed for each call: fresh judgments
    assert judge.generate([]) == [] and len(learner.asked) == 2 and judge.model_id == "scripted"


@pytest.mark.slow
def test_sampled_judge_keeps_every_sampled_judgment_for_grpo(tiny_model):
    from rewardkit.backends.base import ChatRequest
    from rewardkit.grpo.modes import SampledJudge
    from rewardkit.grpo.trainer import Learner

    learner = Learner(TrainConfig(model=tiny_model, beta=0.0, num_threads=1))
    judge = SampledJudge(learner, n=3)
    reqs = [ChatRequest([{"role": "user", "content": f"judge {i}"}], max_tokens=5) for i in range(2)]
    out = judge.generate(reqs)
    assert [len(c.texts) for c in out] == [3, 3]  # the scorer reads texts[0]; all three form one GRPO group
    taken_reqs, roll = judge.take()
    assert taken_reqs == reqs and len(roll) == 6 and roll.group == [0, 0, 0, 1, 1, 1] and roll.max_tokens == 5
    assert [roll.texts[i * 3:(i + 1) * 3] for i in range(2)] == [c.texts for c in out]
    assert all(len(c) <= 5 for c in roll.completion_ids) and judge.take() is None  # taken once


def test_expected_r_dis_is_the_papers_r_dis_in_expectation_over_the_verdict():
    # one reference slice and three generated ones (correct trace, wrong trace, unknown), P(YES) as given. By hand
    # from sec. 3: R^d is log M_d on a reference slice, log(1 - M_d) on a generated one (M_d clipped to
    # [1e-6, 1 - 1e-6]); R^a = 1 when the verdict agrees with the trace's answer (YES on a correct one, NO on a
    # wrong one), none on reference or unknown slices
    from rewardkit.grpo.modes import expected_r_dis

    ref, labels = [True, False, False, False], [None, True, False, None]
    p = torch.tensor([0.8, 0.3, 0.6, 0.5], dtype=torch.float64)
    lo, hi = math.log(1e-6), math.log(1 - 1e-6)
    # m_d=verdict: P(YES) R(YES) + P(NO) R(NO) with hard M_d; lambda3 = 1, lambda4 = 0.5
    want = [0.8 * hi + 0.2 * lo, 0.3 * (lo + 0.5) + 0.7 * hi, 0.6 * lo + 0.4 * (hi + 0.5), 0.5 * lo + 0.5 * hi]
    np.testing.assert_allclose(expected_r_dis(p, ref, labels, 1.0, 0.5, "verdict"), want, rtol=1e-9)
    # lambda3 = 2: only R^d doubles
    want = [1.6 * hi + 0.4 * lo, 2 * (0.3 * lo + 0.7 * hi) + 0.15, 2 * (0.6 * lo + 0.4 * hi) + 0.2, lo + hi]
    np.testing.assert_allclose(expected_r_dis(p, ref, labels, 2.0, 0.5, "verdict"), want, rtol=1e-9)
    # m_d=probability: lambda3 log(P(YES) | 1 - P(YES)) + lambda4 E[R^a]; lambda3 = 2, lambda4 = 0.5
    want = [2 * math.log(0.8), 2 * math.log(0.7) + 0.5 * 0.3, 2 * math.log(0.4) + 0.5 * 0.4, 2 * math.log(0.5)]
    np.testing.assert_allclose(expected_r_dis(p, ref, labels, 2.0, 0.5, "probability"), want, rtol=1e-9)
    # lambda4 = 2 (not the paper's 0.5): only R^a doubles
    want = [0.8 * hi + 0.2 * lo, 0.3 * (lo + 2) + 0.7 * hi, 0.6 * lo + 0.4 * (hi + 2), 0.5 * lo + 0.5 * hi]
    np.testing.assert_allclose(expected_r_dis(p, ref, labels, 1.0, 2.0, "verdict"), want, rtol=1e-9)
    want = [math.log(0.8), math.log(0.7) + 2 * 0.3, math.log(0.4) + 2 * 0.4, math.log(0.5)]
    np.testing.assert_allclose(expected_r_dis(p, ref, labels, 1.0, 2.0, "probability"), want, rtol=1e-9)
    # a certain verdict is clipped like a hard one: log 1e-6, never -inf (a NaN gradient)
    p = torch.tensor([0.0, 1.0, 1.0], dtype=torch.float64)
    got = expected_r_dis(p, [True, False, True], [None, True, None], 1.0, 0.5, "probability")
    np.testing.assert_allclose(got, [lo, lo + 0.5, hi], rtol=1e-9)


def _verdict_p_yes(backend, item) -> float:
    """P(**YES) / (P(**YES) + P(**NO)) of a bare verdict after the discriminator prompt, read as the probability
    mode's M_d is (the backend's verdict_probs): "YES" and "NO" begin with different tokens, so the first token
    decides. By hand from one plain forward pass of the prompt, and checked against verdict_probs."""
    from rewardkit.backends.base import VerdictRequest
    from rewardkit.prompts.gar import discriminator_messages

    tok = backend.tokenizer
    messages = discriminator_messages(item.problem, item.text, item.context)
    prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False) + "**"
    ids = tok(prompt, add_special_tokens=False).input_ids
    firsts = [tok(prompt + c, add_special_tokens=False).input_ids[len(ids)] for c in ("YES", "NO")]
    assert firsts[0] != firsts[1]
    with torch.no_grad():
        logp = torch.log_softmax(backend.model(torch.tensor([ids])).logits[0, -1].double(), -1)
    p = 1 / (1 + math.exp(logp[firsts[1]].item() - logp[firsts[0]].item()))
    (read,) = backend.verdict_probs([VerdictRequest(messages, ("YES", "NO"), "**")])
    assert read.probs[0] == pytest.approx(p, rel=1e-4)
    return p


@pytest.mark.slow
def test_gar_expected_variant_reports_the_expected_r_dis_of_the_models_own_verdict_probabilities(tiny_model, tmp_path):
    # the expected variant's objective, by hand from P(YES) of each slice measured apart (a plain forward pass):
    # m_d=verdict, lambda3 = 1, lambda4 = 0.5, one reference slice and two generated ones (correct, unknown):
    # mean_ref E + mean_gen E with E = P(YES) R(YES) + P(NO) R(NO)
    import dataclasses

    from rewardkit.gar.slices import SliceItem

    mode, _, _ = _gar(tiny_model, tmp_path, dis_update="expected", m_d="verdict", lambda4=0.5)
    ref = [SliceItem("What is 2+3?", "2+3 = 5.")]
    gen = [SliceItem("What is 2+3?", "2 plus 3 makes 5.", "First, "), SliceItem("What is 2+3?", "So it is 6.")]
    p_ref, p_c, p_u = (_verdict_p_yes(mode.learner.backend, it) for it in ref + gen)
    lo, hi = math.log(1e-6), math.log(1 - 1e-6)
    e_ref = p_ref * hi + (1 - p_ref) * lo
    e_gen = (p_c * (lo + 0.5) + (1 - p_c) * hi + p_u * lo + (1 - p_u) * hi) / 2
    m = mode._expected_update(gen, [True, None], ref)
    assert m["dis_ref_p_yes"] == pytest.approx(p_ref, rel=1e-4)
    assert m["dis_gen_p_yes"] == pytest.approx((p_c + p_u) / 2, rel=1e-4)
    assert m["dis_expected_r_dis"] == pytest.approx(e_ref + e_gen, rel=1e-5) and m["dis_slices"] == 3
    # m_d=probability: lambda3 log M_d on the reference, log(1 - M_d) + lambda4 P(YES) on the correct trace's slice
    mode.options = dataclasses.replace(mode.options, m_d="probability")
    p_ref, p_c, p_u = (_verdict_p_yes(mode.learner.backend, it) for it in ref + gen)  # after the first step
    m = mode._expected_update(gen, [True, None], ref)
    want = math.log(p_ref) + (math.log1p(-p_c) + 0.5 * p_c + math.log1p(-p_u)) / 2
    assert m["dis_expected_r_dis"] == pytest.approx(want, rel=1e-5)
    # R^d needs both sets: no step without generated (or reference) slices
    before = next(mode.learner.model.parameters()).detach().clone()
    assert mode._expected_update([], [], ref) == {"dis_skipped": 1.0}
    assert mode._expected_update(gen, [True, None], []) == {"dis_skipped": 1.0}
    assert torch.equal(before, next(mode.learner.model.parameters()).detach())


@pytest.mark.slow
def test_gar_expected_variant_climbs_the_expected_r_dis(tiny_model, tmp_path):
    # rewardkit's named variant: gradient ascent on P(YES) R(YES) + P(NO) R(NO) per slice; the same batch's
    # objective, measured again after the step, is higher. A small step: AdamW's first one moves every weight by
    # lr, and on the random tiny model lr = 1e-3 already overshoots (1e-6 to 3e-4 all climb)
    mode, trainer, _ = _gar(tiny_model, tmp_path, dis_update="expected", lr=1e-4)
    groups = GAR_GROUPS
    scores = trainer.scorer.score(groups)
    first = mode.after_step(trainer, groups, scores, step=0)
    second = mode.after_step(trainer, groups, scores, step=1)
    assert first["dis_slices"] == 3 and second["dis_expected_r_dis"] > first["dis_expected_r_dis"]


LONG_EXPERT = [Group("a", PROMPTS[0].prompt, ["2+3 = 5.", "2+3 = 6, wrong."],
                     expert="2 plus 3 is 5. Check: 5 - 3 = 2. So the sum is 5. The answer is 5.")]


@pytest.mark.slow
def test_gar_expected_variant_draws_as_many_reference_slices_as_generated_ones(tiny_model, tmp_path):
    scorer = SliceOptions(temperature=1.0, slice_tokens=4, min_slice_tokens=1)
    mode, trainer, _ = _gar(tiny_model, tmp_path, dis_update="expected", scorer=scorer)
    n_gen = sum(len(mode.slicer.slices(r)) for r in LONG_EXPERT[0].responses)
    assert len(mode.slicer.slices(LONG_EXPERT[0].expert)) > n_gen  # more reference slices than generated: a draw
    m = mode.after_step(trainer, LONG_EXPERT, trainer.scorer.score(LONG_EXPERT), step=1)
    assert m["dis_slices"] == 2 * n_gen and np.isfinite(m["dis_expected_r_dis"])


@pytest.mark.slow
def test_gar_m_d_is_asked_of_the_slice_with_its_context(tiny_model, tmp_path):
    # with context on, M_d is the discriminator's P(YES) for the slice shown after the trace before it, at the
    # place each read judgment wrote its verdict; an unread judgment has none
    from rewardkit.backends.base import VerdictRequest
    from rewardkit.gar.slices import SliceItem
    from rewardkit.prompts.gar import VERDICT_CHOICES, discriminator_messages

    mode, _, _ = _gar(tiny_model, tmp_path, scorer=SliceOptions(temperature=1.0, context=True))
    item = SliceItem(PROMPTS[0].prompt, "Then 2+3 = 5.", "First, add the numbers. ")
    texts = ["Fine.\n**YES** ok", "no verdict"]
    got = mode._verdict_p_yes([item], texts, [1.0, None])
    msgs = discriminator_messages(item.problem, item.text, item.context)
    want = mode.learner.backend.verdict_probs([VerdictRequest(msgs, VERDICT_CHOICES, "Fine.\n**")])[0].probs[0]
    alone = discriminator_messages(item.problem, item.text, "")
    other = mode.learner.backend.verdict_probs([VerdictRequest(alone, VERDICT_CHOICES, "Fine.\n**")])[0].probs[0]
    assert got[0] == pytest.approx(want, rel=1e-6) and got[0] != pytest.approx(other, rel=1e-6) and got[1] is None


@pytest.mark.slow
def test_gar_soft_variant_rewards_p_yes_and_samples_the_judgments_apart(tiny_model, tmp_path):
    mode, trainer, calls = _gar(tiny_model, tmp_path, scorer=SliceOptions(mode="logit", soft=True, temperature=1.0))
    groups = GAR_GROUPS
    (score,) = trainer.scorer.score(groups)
    r_s = score.components["slice_mean"]
    assert calls == [] and all(0 < x < 1 for x in r_s)  # P(YES) of the discriminator, no sampled judgment
    m = mode.after_step(trainer, groups, [score], step=0)
    assert calls == [2, 1] and m["dis_slices"] == 3  # the generated slices' judgments, then the reference's


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.booleans(), min_size=2, max_size=6), min_size=1, max_size=4),
       st.lists(st.booleans(), min_size=4, max_size=4))
def test_r_a_changes_no_advantage_at_the_papers_lambda4_with_hard_verdicts(groups, correct):
    """Issue 29: what docs/training.md says, checked: with hard YES/NO verdicts the GRPO advantages of a generated
    slice's judgments are the same at lambda4 = 0.5 as at lambda4 = 0 (R^d alone), and not at lambda4 = 20."""
    def advantages(lambda4: float) -> list[np.ndarray]:
        return [grpo_advantages(judgment_rewards([float(v) for v in verdicts], [False] * len(verdicts),
                                                 [c] * len(verdicts), 1.0, lambda4).reshape(1, -1))[0]
                for verdicts, c in zip(groups, correct, strict=False)]

    for a, b in zip(advantages(0.5), advantages(0.0), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-9)
    # a correct trace's slice judged both ways: YES scores -13.8 + lambda4, NO 0, reversed once lambda4 > 13.8
    for verdicts, c, a0, a20 in zip(groups, correct, advantages(0.0), advantages(20.0), strict=False):
        if c and 0 < sum(verdicts) < len(verdicts):
            np.testing.assert_array_equal(np.sign(a20), -np.sign(a0))


def test_the_gar_mode_says_what_r_a_does_at_lambda4_one_half():
    """The sentence stands in the gar mode's lambda4 help, the README's training section and docs/training.md."""
    import dataclasses
    from pathlib import Path

    from rewardkit.gar.rewards import R_A_AT_PAPER_LAMBDA4
    from rewardkit.grpo.modes import GarOptions

    (help_,) = [f.metadata["help"] for f in dataclasses.fields(GarOptions) if f.name == "lambda4"]
    assert R_A_AT_PAPER_LAMBDA4 in help_
    root = Path(__file__).resolve().parents[2]
    for doc in ("README.md", "docs/training.md"):
        assert " ".join(R_A_AT_PAPER_LAMBDA4.split()) in " ".join((root / doc).read_text().split()), doc
