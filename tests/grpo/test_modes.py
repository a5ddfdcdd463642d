"""The training modes: RARO's shared LLM and GAR's joint GRPO around the same loop (mechanics on a tiny
random model; GAR's judgments scripted so that they parse)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rewardkit.gar.rewards import alignment_reward, gan_reward, judgment_rewards
from rewardkit.gar.slices import SliceOptions
from rewardkit.grpo import GRPOTrainer, TrainConfig
from rewardkit.grpo.modes import GarJoint, RaroShared, critic_items, critic_rollouts
from rewardkit.grpo.trainer import Rollouts
from rewardkit.raro.critic import CriticOptions
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
    with pytest.raises(ValueError, match="critic_samples"):
        RaroShared(critic_samples=0)
    with pytest.raises(ValueError, match="temperature"):
        GarJoint(scorer=SliceOptions(temperature=0.0))  # GRPO on its judgments needs sampled judgments
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


def _scripted_sample(learner, calls: list[int]):
    """Judgments that parse: **NO** first for a slice saying 'wrong', else **YES**; the other verdict second."""
    tok = learner.tokenizer

    def sample(chats, n, seed_key, max_new_tokens=None) -> Rollouts:
        calls.append(len(chats))
        r = Rollouts([], [], [], [], [], max_tokens=max_new_tokens)
        for i, chat in enumerate(chats):
            first = "NO" if "wrong" in chat[-1]["content"] else "YES"
            prompt = list(tok.apply_chat_template(chat, add_generation_prompt=True)["input_ids"])
            for j in range(n):
                v = first if j == 0 else {"YES": "NO", "NO": "YES"}[first]
                text = f"Checked.\n**{v}** Brief."
                r.prompt_ids.append(prompt)
                r.completion_ids.append(tok(text).input_ids + [tok.eos_token_id])
                r.texts.append(text)
                r.truncated.append(False)
                r.group.append(i)
        return r
    return sample


GAR_GROUPS = [Group("a", PROMPTS[0].prompt, [r"2+3 = 5. The answer is \boxed{5}.",
                                             r"2+3 = 6, which is wrong. The answer is \boxed{6}."],
                    reference="5", expert=PROMPTS[0].expert)]


def _gar(tiny_model: str, tmp_path, **options) -> tuple[GarJoint, GRPOTrainer, list[int]]:
    """A GAR joint trainer on the tiny model whose discriminator samples scripted judgments (calls recorded)."""
    mode = GarJoint(discriminator=tiny_model, lr=1e-2, **options)
    trainer = GRPOTrainer(TrainConfig(model=tiny_model, out_dir=str(tmp_path / "run"), **SETTINGS), PROMPTS[:1],
                          modes=[mode])
    calls: list[int] = []
    mode.learner.sample = _scripted_sample(mode.learner, calls)
    return mode, trainer, calls


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
    m = mode.after_step(trainer, GAR_GROUPS, trainer.scorer.score(GAR_GROUPS), step=0)
    (ref, gen), = seen
    assert ref.advantages.tolist() == [0.0, 0.0]
    assert gen.advantages[0] > 0 > gen.advantages[1] and gen.advantages[2] > 0 > gen.advantages[3]
    assert 0 < m["dis_ref_p_yes"] < 1 and 0 < m["dis_gen_p_yes"] < 1  # probabilities, not verdicts


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


@pytest.mark.slow
def test_gar_expected_variant_climbs_the_expected_r_dis(tiny_model, tmp_path):
    # rewardkit's named variant: gradient ascent on P(YES) R(YES) + P(NO) R(NO) per slice; the same batch's
    # objective, measured again after the step, is higher
    mode, trainer, _ = _gar(tiny_model, tmp_path, dis_update="expected")
    groups = GAR_GROUPS
    scores = trainer.scorer.score(groups)
    first = mode.after_step(trainer, groups, scores, step=0)
    second = mode.after_step(trainer, groups, scores, step=1)
    assert first["dis_slices"] == 3 and second["dis_expected_r_dis"] > first["dis_expected_r_dis"]


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
