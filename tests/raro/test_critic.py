"""RARO relativistic critic: rewards (Sec. 3.3), scorer routing with a deterministic judge, replay buffer."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from rewardkit.backends.base import ChatRequest, Completion
from rewardkit.prompts.raro import VERDICT_CHOICES, VERDICT_PREFIX
from rewardkit.raro.critic import (
    CriticScorer,
    answer_view,
    critic_messages,
    critic_reward,
    critic_rollout_rewards,
    expected_rewards,
    expert_positions,
    policy_reward,
    resolve_choice,
)
from rewardkit.raro.replay import CriticExample, ReplayBuffer, mix_critic_batch
from rewardkit.scoring import get_scorer
from rewardkit.testing import ScriptedJudge
from rewardkit.types import Group, Status

# --------------------------------------------------------------------------------------- test doubles

_A1 = re.compile(r"<answer_1>\n(.*?)\n</answer_1>", re.S)
_A2 = re.compile(r"<answer_2>\n(.*?)\n</answer_2>", re.S)


def _content_pick(prompt: str, biased: bool = False) -> str:
    a1, a2 = _A1.search(prompt).group(1), _A2.search(prompt).group(1)
    if "GARBLE" in a1 + a2:
        return "garble"
    if "TIMEOUT" in a1 + a2:
        return "timeout"
    if biased:
        return "1"
    r1, r2 = "RIGHT" in a1, "RIGHT" in a2
    return "tie" if r1 == r2 else ("1" if r1 else "2")


def ContentJudge(biased: bool = False, pick=None) -> ScriptedJudge:  # noqa: N802 - reads like the class it replaces
    """Scripted critic: prefers the answer containing 'RIGHT'; tie when both or neither do. 'GARBLE' makes it
    reply without a verdict, 'TIMEOUT' times the request out; ``biased=True`` always says "Answer 1" (like
    SmolLM2's position bias); ``pick(prompt)`` replaces the rule."""
    choose = pick or (lambda prompt: _content_pick(prompt, biased))

    def reply(prompt: str):
        p = choose(prompt)
        if p == "timeout":
            return Status.TIMEOUT
        if p == "garble":
            return "I cannot decide between them."
        return "<think>checking both</think>\n" + ("tie" if p == "tie" else f"Answer {p}")

    def probs(prompt: str, choices):
        assert tuple(choices) == ("1", "2", "tie")
        return {"1": [0.7, 0.1, 0.2], "2": [0.1, 0.7, 0.2], "tie": [0.1, 0.1, 0.8]}[choose(prompt)]

    return ScriptedJudge(reply, probs, model_id="content-judge")


EXPERT = "We compute 6*7 = 42. RIGHT \\boxed{42}"


def _group(responses, expert=EXPERT, gid="g0"):
    return Group(gid, "What is 6 times 7?", responses, reference="42", expert=expert)


# ------------------------------------------------------------------------------------------- rewards


def test_rewards_follow_section_3_3_with_table_5_taus():
    assert (policy_reward("policy"), policy_reward("expert"), policy_reward("tie")) == (1.0, 0.0, 0.6)
    assert (critic_reward("expert"), critic_reward("policy"), critic_reward("tie")) == (1.0, 0.0, 0.55)


def test_decisive_verdicts_are_zero_sum_and_ties_pay_both():
    for label in ("policy", "expert"):
        assert policy_reward(label, 0.3) + critic_reward(label, 0.9) == 1.0
    assert policy_reward("tie", 0.3) + critic_reward("tie", 0.9) == pytest.approx(1.2)


def test_invalid_label_is_an_error_not_a_zero():
    with pytest.raises(ValueError, match="mask invalid"):
        policy_reward(None)
    with pytest.raises(ValueError):
        critic_reward("1")


def test_resolve_choice_depends_on_expert_slot():
    assert resolve_choice("1", 1) == "expert" and resolve_choice("2", 1) == "policy"
    assert resolve_choice("1", 2) == "policy" and resolve_choice("2", 2) == "expert"
    assert resolve_choice("tie", 2) == "tie"


def test_expected_rewards_match_sampling_in_the_limit():
    probs, pos = np.array([0.5, 0.2, 0.3]), 2  # expert in slot 2: P(policy)=0.5, P(expert)=0.2, P(tie)=0.3
    e_pol, e_crit = expected_rewards(probs, pos)
    rng = np.random.default_rng(0)
    draws = rng.choice(3, size=200_000, p=probs)
    labels = [resolve_choice(("1", "2", "tie")[d], pos) for d in draws[:20_000]]
    mc_pol = np.mean([policy_reward(lab) for lab in labels])
    mc_crit = np.mean([critic_reward(lab) for lab in labels])
    assert abs(mc_pol - e_pol) < 0.02 and abs(mc_crit - e_crit) < 0.02
    assert e_pol == pytest.approx(0.5 + 0.6 * 0.3)


@pytest.mark.parametrize("pos", [1, 2])
def test_expected_rewards_use_each_sides_own_tie_reward(pos):
    # Table 5: a tie pays the policy tau_pol = 0.6 and the critic tau_crit = 0.55. A sure tie pays each side its own tau.
    assert expected_rewards([0.0, 0.0, 1.0], pos) == pytest.approx((0.6, 0.55), abs=1e-12)
    assert expected_rewards([0.0, 0.0, 1.0], pos, tau_pol=0.3, tau_crit=0.9) == pytest.approx((0.3, 0.9), abs=1e-12)
    # P(expert slot) = 0.2, P(policy slot) = 0.3, P(tie) = 0.5: E[R_pol] = 0.3 + 0.6 * 0.5, E[R_crit] = 0.2 + 0.55 * 0.5
    probs = [0.2, 0.3, 0.5] if pos == 1 else [0.3, 0.2, 0.5]
    assert expected_rewards(probs, pos) == pytest.approx((0.6, 0.475), abs=1e-12)


def test_expert_positions_are_seeded_and_balanced():
    a = expert_positions(4000, seed=3, key="g")
    assert a == expert_positions(4000, seed=3, key="g")
    assert a != expert_positions(4000, seed=4, key="g")
    assert set(a) == {1, 2}
    assert stats.binomtest(a.count(1), len(a), 0.5).pvalue > 1e-3


def test_critic_rollout_rewards_masks_unparseable():
    r, s, m = critic_rollout_rewards(["...\nAnswer 2", "hmm", "tie"], [2, 1, 1])
    assert r[0] == 1.0 and np.isnan(r[1]) and r[2] == 0.55
    assert s == [Status.OK, Status.INVALID, Status.OK] and m[1]


def test_critic_rollout_rewards_mask_rollouts_cut_off_for_length():
    """A critic rollout that hit the token budget gives no verdict, even when its text ends like one."""
    r, s, m = critic_rollout_rewards(["...\nAnswer 2", "...\nAnswer 2"], [2, 2], finish_reasons=["stop", "length"])
    assert r[0] == 1.0 and np.isnan(r[1])
    assert s == [Status.OK, Status.INVALID] and "length" in m[1]


# -------------------------------------------------------------------------------------------- scorer


def test_scorer_rewards_with_content_judge_are_order_invariant():
    g = _group(["6*7=42 RIGHT \\boxed{42}", "6*7=36 \\boxed{36}", "GARBLE", "TIMEOUT"])
    for seed in range(4):
        judge = ContentJudge()
        (s,) = CriticScorer(judge=judge, seed=seed).score([g])
        # equal quality -> tie -> tau_pol; worse -> critic picks the expert -> 0
        assert s.rewards[0] == 0.6 and s.rewards[1] == 0.0
        assert s.statuses == [Status.OK, Status.OK, Status.INVALID, Status.TIMEOUT]
        assert np.isnan(s.rewards[2]) and np.isnan(s.rewards[3])
        assert s.components["critic_label"][:2] == ["tie", "expert"]
        assert list(s.components["critic_reward"][:2]) == [0.55, 1.0]
        assert "no Answer 1/Answer 2/tie verdict" in s.messages[2]
        assert judge.generate_batches == [4]


def test_position_biased_critic_rewards_the_policy_exactly_when_it_sits_first():
    g = _group([f"answer {i}" for i in range(64)])
    (s,) = CriticScorer(judge=ContentJudge(biased=True), seed=11).score([g])
    pos = np.array(s.components["expert_position"])
    np.testing.assert_array_equal(s.rewards, (pos == 2).astype(float))
    assert 0 < s.rewards.mean() < 1  # the seeded random order spreads the bias over both slots


def test_batch_is_one_backend_call_and_groups_without_expert_abstain():
    judge = ContentJudge()
    groups = [_group(["a", "b"], gid="x"), _group(["c"], expert=None, gid="y"), _group(["RIGHT"], gid="z")]
    out = CriticScorer(judge=judge).score(groups)
    assert judge.generate_batches == [3]
    assert [o.group_id for o in out] == ["x", "y", "z"]
    assert out[1].statuses == [Status.ABSTAIN] and "no expert answer" in out[1].messages[0]
    assert out[0].cost.judge_calls == 2 and out[2].cost.judge_calls == 1
    assert out[0].cost.prompt_tokens == 20


def test_logit_mode_returns_expected_reward():
    judge = ContentJudge()
    g = _group(["RIGHT 42", "wrong 36"])
    (s,) = CriticScorer(judge=judge, mode="logit", seed=1).score([g])
    assert judge.verdict_batches == [2] and judge.generate_batches == []
    # both right -> judge says tie with p=0.8, each answer 0.1: E[R_pol] = 0.1 + 0.6*0.8
    assert s.rewards[0] == pytest.approx(0.1 + 0.6 * 0.8)
    # policy wrong: P(expert)=0.7, P(policy)=0.1, P(tie)=0.2 whatever the slot
    assert s.rewards[1] == pytest.approx(0.1 + 0.6 * 0.2)
    assert s.components["critic_label"] == ["tie", "expert"]


def test_views_hide_reasoning_from_the_critic():
    g = _group(["<think>secret chain</think>\nRIGHT \\boxed{42}"])
    spy = ContentJudge()
    CriticScorer(judge=spy, view="answer").score([g])
    CriticScorer(judge=spy, view="final").score([g])
    seen = spy.prompts
    assert "secret chain" not in seen[0] and "RIGHT" in seen[0]
    assert "<answer_1>\n42\n</answer_1>" in seen[1] and "<answer_2>\n42\n</answer_2>" in seen[1]


def test_registry_builds_the_scorer_with_cli_strings():
    s = get_scorer("critic", judge=ContentJudge(), tau_pol="0.5", mode="logit")
    assert isinstance(s, CriticScorer) and s.options.tau_pol == 0.5 and s.options.mode == "logit"
    with pytest.raises(ValueError, match="tie rewards"):
        CriticScorer(judge=ContentJudge(), tau_pol=1.5)


def test_prompt_uses_the_paper_input_format():
    judge = ContentJudge()
    captured: list[ChatRequest] = []
    orig = judge.generate
    judge.generate = lambda reqs: (captured.extend(reqs), orig(reqs))[1]
    CriticScorer(judge=judge).score([_group(["x"])])
    text = captured[0].messages[-1]["content"]
    assert text.startswith("You are an expert mathematics critic whose goal is to compare two answers")
    assert "Question:\n<question>\nWhat is 6 times 7?\n</question>" in text
    assert "Answer 1:\n<answer_1>" in text and "Answer 2:\n<answer_2>" in text


# ------------------------------------------------------------------------------------- replay buffer


def _ex(i: int) -> CriticExample:
    return CriticExample(f"q{i}", f"e{i}", f"p{i}")


def test_reservoir_is_bounded_and_uniform_over_everything_seen():
    cap, n, runs = 50, 500, 300
    counts = np.zeros(n)
    for seed in range(runs):
        buf = ReplayBuffer(cap, seed=seed)
        for start in range(0, n, 37):  # added in uneven chunks
            buf.add([_ex(i) for i in range(start, min(start + 37, n))])
        assert len(buf) == cap and buf.seen == n
        assert len({x.question for x in buf.items}) == cap
        for x in buf.items:
            counts[int(x.question[1:])] += 1
    # each item is kept with probability cap/n = 0.1: compare deciles (early items must not be favoured)
    decile = counts.reshape(10, -1).sum(1)
    expected = runs * cap / 10
    assert stats.chisquare(decile, np.full(10, expected)).pvalue > 1e-3


def test_buffer_persists_atomically_and_resumes_the_same_reservoir(tmp_path):
    path = tmp_path / "replay.json"
    a = ReplayBuffer(20, seed=5, path=path)
    a.add([_ex(i) for i in range(60)])
    a.save()
    b = ReplayBuffer.load(path)
    a.add([_ex(i) for i in range(60, 200)])
    b.add([_ex(i) for i in range(60, 200)])
    assert a.items == b.items and a.seen == b.seen == 200
    assert [p.name for p in tmp_path.iterdir()] == ["replay.json"]  # no temp files left


def test_failed_save_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "replay.json"
    buf = ReplayBuffer(5, path=path)
    buf.add([_ex(0)])
    buf.save()
    before = path.read_text()
    buf.add([_ex(1)])

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(json, "dump", boom)
    with pytest.raises(OSError, match="disk full"):
        buf.save()
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["replay.json"]


def test_corrupt_buffer_file_names_the_file(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json"):
        ReplayBuffer.load(p)


def test_a_file_of_another_format_is_not_read_as_a_buffer(tmp_path):
    # a later format (its fields may mean something else) or another JSON file with the same keys: refused, naming
    # the file and the tag, not loaded as if it were this version's buffer
    buf = ReplayBuffer(4, path=tmp_path / "replay.json")
    buf.add([_ex(1)])
    state = json.loads(buf.save().read_text())
    for fmt, shown in (("rewardkit.raro.replay/2", "'rewardkit.raro.replay/2'"), (None, "None")):
        p = tmp_path / "other.json"
        p.write_text(json.dumps({**state, "format": fmt} if fmt else {k: v for k, v in state.items() if k != "format"}))
        with pytest.raises(ValueError) as e:
            ReplayBuffer.load(p)
        assert str(e.value) == (f"cannot read RARO replay buffer {str(p)!r}: its format is {shown}, "
                                "not 'rewardkit.raro.replay/1'")
    p.write_text("[1, 2]")  # JSON, but not an object
    with pytest.raises(ValueError, match="its format is None"):
        ReplayBuffer.load(p)


def test_mix_is_half_current_half_replay_and_seeded():
    buf = ReplayBuffer(100)
    buf.add([_ex(i) for i in range(100)])
    cur = [_ex(1000 + i) for i in range(30)]
    m1 = mix_critic_batch(cur, buf, 16, seed=1)
    assert [s for _, s in m1].count("current") == 8 and [s for _, s in m1].count("replay") == 8
    assert m1 == mix_critic_batch(cur, buf, 16, seed=1) and m1 != mix_critic_batch(cur, buf, 16, seed=2)
    assert len({x for x, _ in m1}) == 16
    # empty buffer: all from the current rollouts (Algorithm 2 at t = 1)
    m0 = mix_critic_batch(cur, ReplayBuffer(10), 16, seed=1)
    assert [s for _, s in m0] == ["current"] * 16


def test_critic_batch_mixes_then_adds_and_saves(tmp_path):
    path = tmp_path / "r.json"
    sc = CriticScorer(judge=ContentJudge(), replay_path=str(path), replay_capacity=64, seed=2)
    g1 = [_group([f"old {i}" for i in range(8)], gid="a")]
    items1 = sc.critic_batch(g1, size=8, step=0)
    assert {it.source for it in items1} == {"current"}
    assert path.exists() and len(ReplayBuffer.load(path)) == 8
    g2 = [_group([f"new {i}" for i in range(8)], gid="b")]
    items2 = sc.critic_batch(g2, size=8, step=1)
    sources = [it.source for it in items2]
    assert sources.count("replay") == 4
    assert all(it.example.policy.startswith("old") for it in items2 if it.source == "replay")
    assert all(it.example.policy.startswith("new") for it in items2 if it.source == "current")
    # each prompt shows the expert in its recorded slot
    for it in items2:
        body = it.messages[-1]["content"]
        slot = _A1 if it.expert_position == 1 else _A2
        assert slot.search(body).group(1) == it.example.expert
    # critic rewards of rollouts on those prompts
    texts = [f"Answer {it.expert_position}" for it in items2]
    r, s = sc.critic_rewards(items2, texts)
    assert list(r) == [1.0] * 8 and s == [Status.OK] * 8
    reopened = CriticScorer(judge=ContentJudge(), replay_path=str(path), replay_capacity=64)
    assert len(reopened.replay) == 16


def test_replay_sample_uses_callers_rng():
    buf = ReplayBuffer(10)
    buf.add([_ex(i) for i in range(10)])
    assert buf.sample(3, random.Random(1)) == buf.sample(3, random.Random(1))
    assert len(buf.sample(50, random.Random(0))) == 10


# ------------------------------------------------------------------------------ real embedded model


@pytest.mark.model
def test_real_model_logit_mode_end_to_end(judge_backend):
    g = _group(["6*7 = 42, so \\boxed{42}", "6*7 = 36, so \\boxed{36}"])
    none = _group(["x"], expert=None, gid="noexp")
    s, a = CriticScorer(judge=judge_backend, mode="logit", view="final").score([g, none])
    assert s.statuses == [Status.OK, Status.OK] and np.all((s.rewards >= 0) & (s.rewards <= 1))
    assert all(abs(sum(p) - 1) < 1e-6 for p in s.extra["critic_probs"])
    assert s.cost.judge_calls + s.cost.cache_hits == 2 and s.cost.prompt_tokens > 0
    assert a.statuses == [Status.ABSTAIN]


@pytest.mark.model
def test_real_model_generate_mode_end_to_end(judge_backend):
    g = _group(["\\boxed{36}"])
    (s,) = CriticScorer(judge=judge_backend, mode="generate", max_tokens=4, view="final", seed=1).score([g])
    assert len(s.statuses) == 1 and set(s.statuses) <= {Status.OK, Status.INVALID}
    for st, r, out in zip(s.statuses, s.rewards, s.extra["critic_outputs"], strict=True):
        assert isinstance(out, str)
        assert (st is Status.OK) == (not np.isnan(r))
    assert s.cost.completion_tokens > 0


def test_group_from_shared_rollouts_uses_the_solution_as_expert(rollouts_path):
    from rewardkit.runtime.inputs import group_from_record

    row = json.loads(rollouts_path.read_text().splitlines()[0])
    g = group_from_record(row)
    assert g.expert == row["solution"] and "\\boxed{420}" in g.expert
    assert g.reference == "420" and len(g) == 8 and g.labels == row["correct"]
    (s,) = CriticScorer(judge=ContentJudge(), view="final").score([g])
    # the double prefers answers containing RIGHT; none do -> every pair is a tie -> tau_pol
    assert list(s.rewards) == [0.6] * 8
    del row["solution"]
    (a,) = CriticScorer(judge=ContentJudge()).score([group_from_record(row)])
    assert a.statuses == [Status.ABSTAIN] * 8


def _countdown_pick(prompt):
    """A perfect Countdown critic: verifies both answers with the exact verifier."""
    from rewardkit.raro.countdown import check_expression

    nums = [int(x) for x in re.findall(r"\d+", re.search(r"Use the four numbers (.*?) to create", prompt).group(1))]
    ok = [check_expression(rx.search(prompt).group(1), nums).correct is True for rx in (_A1, _A2)]
    return "tie" if ok[0] == ok[1] else ("1" if ok[0] else "2")


def test_countdown_groups_with_a_verifying_critic():
    from rewardkit.raro.countdown import generate

    inst = generate(3, seed=5)
    groups = [i.to_group([f"\\boxed{{{i.solution}}}", "\\boxed{1 + 2 + 3 + 4}", "no answer"], id=f"c{j}")
              for j, i in enumerate(inst)]
    out = CriticScorer(judge=ContentJudge(pick=_countdown_pick), view="final", seed=3).score(groups)
    for s in out:
        # correct = as good as the expert (tie, tau_pol); wrong or missing = the critic picks the expert
        assert list(s.rewards) == [0.6, 0.0, 0.0]
        assert s.components["critic_label"] == ["tie", "expert", "expert"]


# ------------------------------------------------------------------------------ mutation-tested details


def test_critic_rollout_rewards_are_float_with_nan_for_invalid_and_use_the_given_tau():
    r, s, m = critic_rollout_rewards(["tie", "no verdict here", "Answer 2"], [1, 1, 2], tau_crit=0.5)  # poetry's tau
    assert r.dtype == np.float64 and r[0] == 0.5 and np.isnan(r[1]) and r[2] == 1.0
    assert s == [Status.OK, Status.INVALID, Status.OK] and m[0] is None and m[1]


def test_critic_rollout_rewards_refuse_finish_reasons_of_another_length():
    with pytest.raises(ValueError):
        critic_rollout_rewards(["Answer 1", "Answer 2"], [1, 2], finish_reasons=["stop"])


def test_each_generate_batch_is_seeded_and_sampled_at_the_temperature_asked():
    g = _group(["RIGHT 42", "wrong 36"])

    def seeds(seed: int, batches: int = 3) -> list[list[int]]:
        judge = ContentJudge()
        scorer = CriticScorer(judge=judge, seed=seed, temperature=0.7, max_tokens=64)
        for _ in range(batches):
            scorer.score([g])
        assert {r.temperature for r in judge.requests} == {0.7} and {r.max_tokens for r in judge.requests} == {64}
        n = len(judge.requests) // batches
        return [[r.seed for r in judge.requests[i * n:(i + 1) * n]] for i in range(batches)]

    first = seeds(5)
    assert all(isinstance(s, int) for b in first for s in b)
    assert len({b[0] for b in first}) == 3  # a new seed for each batch: fresh critic samples every step
    assert seeds(5) == first  # reproducible for the same seed option
    assert seeds(6)[0] != first[0]  # and different for another


def _batch(seed: int, step: int | None = None, **kw):
    scorer = CriticScorer(judge=ContentJudge(), seed=seed, **kw)
    groups = [_group([f"<think>z{i}</think>\nwork \\boxed{{{i}}}" for i in range(6)], gid=f"g{k}") for k in range(3)]
    return scorer, (scorer.critic_batch(groups, 8) if step is None else scorer.critic_batch(groups, 8, step=step))


def test_critic_batch_is_seeded_by_seed_and_step_and_uses_the_view_and_template():
    _, a = _batch(3)
    assert [it.example for it in a] == [it.example for it in _batch(3, step=0)[1]]  # default step is 0
    assert [it.example for it in a] != [it.example for it in _batch(3, step=1)[1]]
    assert [it.example for it in a] != [it.example for it in _batch(4)[1]]
    _, final = _batch(3, view="final", template="general")
    ex = final[0].example
    assert ex.expert == "42" and ex.policy.isdigit()  # the final view: boxed contents of both sides
    general = critic_messages("q", "a", "b", "general")[0]["content"]
    assert final[0].messages[0]["content"].split("\n\n")[0] == general.split("\n\n")[0] != \
        critic_messages("q", "a", "b")[0]["content"].split("\n\n")[0]


def test_critic_rewards_use_the_scorers_tau_and_mask_cut_off_rollouts():
    scorer, items = _batch(3, tau_crit=0.5)
    r, s = scorer.critic_rewards(items[:2], ["tie", "tie"], ["stop", "length"])
    assert r[0] == 0.5 and np.isnan(r[1]) and s == [Status.OK, Status.INVALID]


def test_groups_with_a_blank_or_no_expert_abstain_without_a_backend_call():
    judge = ContentJudge()
    out = CriticScorer(judge=judge).score([_group(["a"], expert="  ", gid="b"), _group(["c"], expert=None, gid="n")])
    assert judge.batches == []  # nothing to ask
    for o in out:
        assert o.statuses == [Status.ABSTAIN] and o.stats == {"has_expert": False}
        assert "compares each response with an expert answer, so it abstains" in o.messages[0]


def test_the_scorer_asks_with_the_template_chosen():
    judge = ContentJudge()
    CriticScorer(judge=judge, template="general").score([_group(["RIGHT 42"])])
    intro = critic_messages("q", "a", "b", "general")[0]["content"].split("\n\n")[0]
    assert judge.prompts[0].split("\n\n")[0] == intro


def test_group_stats_and_each_sides_tau_in_both_modes():
    judge = ContentJudge()
    g = _group(["RIGHT a", "b", "GARBLE", "TIMEOUT"], expert="no answer here")  # policy wins, tie, invalid, timeout
    (s,) = CriticScorer(judge=judge, tau_pol=0.3, tau_crit=0.9).score([g])
    assert s.components["critic_label"] == ["policy", "tie", None, None]
    assert s.rewards[:2].tolist() == [1.0, 0.3] and list(s.components["critic_reward"][:2]) == [0.0, 0.9]
    assert s.stats == {"tie_rate": 0.5, "fooled_rate": 0.5}  # over the 2 read verdicts
    assert s.messages[3].startswith("critic backend: ") and s.messages[3] != "critic backend: "
    (lg,) = CriticScorer(judge=ContentJudge(), mode="logit", tau_pol=0.3, tau_crit=0.9).score([_group(["RIGHT 42"])])
    # both right: P(tie) = 0.8, each slot 0.1 -> E[R_pol] = 0.1 + 0.3 * 0.8, E[R_crit] = 0.1 + 0.9 * 0.8
    assert lg.rewards[0] == pytest.approx(0.1 + 0.3 * 0.8) and lg.components["critic_reward"][0] == pytest.approx(0.82)
    assert lg.components["critic_label"] == ["tie"] and lg.extra["critic_probs"][0] == pytest.approx([0.1, 0.1, 0.8])


# ----------------------------------------------------------------- definitions the mutation run found untested


def test_the_default_view_is_the_answer_and_full_keeps_the_reasoning():
    # the paper's critic sees the answer a, not the reasoning z (Sec. 3.3); "full" shows both
    text = "<think>secret chain</think>\nso RIGHT \\boxed{42}"
    assert "secret chain" not in answer_view(text) and "RIGHT \\boxed{42}" in answer_view(text)
    assert answer_view(text, "full") == text


def test_a_critic_query_is_one_user_message():
    (m,) = critic_messages("q", "a", "b")
    assert m["role"] == "user" and "q" in m["content"]


def test_option_bounds_are_inclusive():
    judge = ContentJudge()
    for ok in ({"max_tokens": 1}, {"temperature": 0.0}, {"replay_capacity": 1}, {"tau_pol": 0.0, "tau_crit": 0.0},
               {"tau_pol": 1.0, "tau_crit": 1.0}):
        CriticScorer(judge=judge, **ok)
    for bad, name in (({"max_tokens": 0}, "max_tokens"), ({"temperature": -0.1}, "temperature"),
                      ({"replay_capacity": 0}, "replay_capacity"), ({"tau_crit": 1.5}, "tie rewards"),
                      ({"tau_crit": -0.1}, "tie rewards")):
        with pytest.raises(ValueError, match=name):
            CriticScorer(judge=judge, **bad)


def test_logit_mode_scores_the_verdicts_after_the_papers_prefix():
    judge = ContentJudge()
    CriticScorer(judge=judge, mode="logit").score([_group(["RIGHT 42"])])
    assert judge.requests[0].assistant_prefix == VERDICT_PREFIX
    assert tuple(judge.requests[0].choices) == VERDICT_CHOICES


def test_logit_rewards_follow_the_expert_slot():
    # a wrong policy answer: the content judge gives the expert's slot 0.7, the policy's 0.1, tie 0.2 wherever the
    # expert sits, so E[R_pol] = 0.1 + 0.6 * 0.2 and E[R_crit] = 0.7 + 0.55 * 0.2 in both slots
    (s,) = CriticScorer(judge=ContentJudge(), mode="logit", seed=2).score([_group([f"wrong {i}" for i in range(12)])])
    assert set(s.components["expert_position"]) == {1, 2}
    np.testing.assert_allclose(s.rewards, 0.1 + 0.6 * 0.2)
    np.testing.assert_allclose(s.components["critic_reward"], 0.7 + 0.55 * 0.2)
    assert s.components["critic_label"] == ["expert"] * 12


def test_generate_seeds_are_non_negative():
    # backends (vLLM, numpy generators) take seeds >= 0; seed 0 is the default
    judge = ContentJudge()
    scorer = CriticScorer(judge=judge)
    for _ in range(2):
        scorer.score([_group(["RIGHT 42"])])
    assert all(r.seed >= 0 for r in judge.requests)


def test_masked_responses_have_nan_critic_rewards_and_the_backends_error():
    judge = ContentJudge()
    (s,) = CriticScorer(judge=judge).score([_group(["RIGHT a", "GARBLE", "TIMEOUT"], expert="no answer here")])
    assert s.components["critic_reward"].dtype == np.float64 and np.isnan(s.components["critic_reward"][1:]).all()
    assert s.messages[2] == "critic backend: scripted timeout"


def test_a_verdict_cut_off_for_length_is_masked():
    cut = ScriptedJudge(lambda prompt: Completion(["Answer 1"], finish_reasons=["length"]))
    (s,) = CriticScorer(judge=cut).score([_group(["RIGHT 42"])])
    assert s.statuses == [Status.INVALID] and np.isnan(s.rewards[0])


def test_rates_count_ties_and_fooled_verdicts_separately():
    # verdicts policy, tie, tie: tie rate 2/3, fooled rate 1/3
    (s,) = CriticScorer(judge=ContentJudge()).score([_group(["RIGHT a", "b", "c"], expert="no answer here")])
    assert s.components["critic_label"] == ["policy", "tie", "tie"]
    assert s.stats == {"tie_rate": pytest.approx(2 / 3), "fooled_rate": pytest.approx(1 / 3)}


@pytest.mark.parametrize("persist", [False, True])
def test_the_replay_reservoir_is_seeded(tmp_path, persist):
    # with a small buffer the reservoir evicts at random: the same seed must give the same critic batches
    def batches(run: int) -> list:
        kw = {"replay_path": str(tmp_path / f"r{run}.json")} if persist else {}
        scorer = CriticScorer(judge=ContentJudge(), seed=1, replay_capacity=3, **kw)
        out = []
        for step in range(4):
            groups = [_group([f"s{step} r{i}" for i in range(6)], gid=f"g{step}")]
            out.append([it.example for it in scorer.critic_batch(groups, 6, step=step)])
        return out

    assert batches(0) == batches(1)


@pytest.mark.parametrize("persist", [False, True])
def test_the_replay_reservoir_follows_the_seed_option(tmp_path, persist):
    # the same 24 examples through a 3-slot reservoir: which 3 stay depends on the seed option
    def kept(seed: int) -> tuple:
        kw = {"replay_path": str(tmp_path / f"s{seed}.json")} if persist else {}
        scorer = CriticScorer(judge=ContentJudge(), seed=seed, replay_capacity=3, **kw)
        for step in range(4):
            scorer.critic_batch([_group([f"s{step} r{i}" for i in range(6)], gid=f"g{step}")], 2, step=step)
        return tuple(x.policy for x in scorer.replay.items)

    assert len({kept(s) for s in range(1, 6)}) > 1


# ------------------------------------------------------------------ replay buffer details the mutation run found


def test_replay_defaults_are_the_scorers_and_agree_between_constructor_and_open(tmp_path):
    # a buffer made with the defaults reopens with open()'s defaults, and both keep the same reservoir as the
    # critic scorer's defaults (seed 0, 10,000 slots)
    path = tmp_path / "default.json"
    ReplayBuffer(path=path).save()
    assert ReplayBuffer.open(path).capacity == ReplayBuffer().capacity == CriticScorer(judge=ContentJudge()).replay.capacity
    many = [_ex(i) for i in range(40)]
    scorer_buf = CriticScorer(judge=ContentJudge(), replay_capacity=3).replay
    plain, opened = ReplayBuffer(3), ReplayBuffer.open(tmp_path / "fresh.json", 3)
    for b in (scorer_buf, plain, opened):
        b.add(many)
    assert plain.items == scorer_buf.items == opened.items


def test_a_loaded_buffer_saves_back_to_its_own_file_and_save_can_write_elsewhere(tmp_path):
    a = ReplayBuffer(4, path=tmp_path / "a.json")
    a.add([_ex(0)])
    a.save()
    b = ReplayBuffer.load(tmp_path / "a.json")
    assert b.path == tmp_path / "a.json"
    b.add([_ex(1)])
    assert b.save() == tmp_path / "a.json" and len(ReplayBuffer.load(tmp_path / "a.json")) == 2
    # an explicit path wins over the buffer's own, and missing folders are made
    other = tmp_path / "deep" / "er" / "b.json"
    assert b.save(other) == other
    assert ReplayBuffer.load(other).items == [_ex(0), _ex(1)]
    assert len(ReplayBuffer.load(tmp_path / "a.json")) == 2  # untouched by the save elsewhere
    with pytest.raises(ValueError, match="no path"):
        ReplayBuffer(4).save()


def test_a_save_cut_short_leaves_only_a_hidden_tmp_file_beside_the_target(tmp_path, monkeypatch):
    # what a crash at fsync time would leave: the complete new state in a hidden '.<name>.*.tmp' file in the
    # target's folder (so os.replace is a same-folder rename), which no '*.json' glob picks up
    path = tmp_path / "replay.json"
    buf = ReplayBuffer(4, path=path)
    buf.add([_ex(0), _ex(1)])
    real_fsync, seen = os.fsync, []

    def fsync(fd):
        seen.append({p.name: p.read_text() for p in tmp_path.iterdir()})
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    buf.save()
    (snapshot,) = seen
    (tmp_name,) = snapshot
    assert tmp_name.startswith(".replay.json.") and tmp_name.endswith(".tmp")
    assert json.loads(snapshot[tmp_name])["items"][1] == {"question": "q1", "expert": "e1", "policy": "p1"}
    assert [p.name for p in tmp_path.glob("*.json")] == ["replay.json"]


def test_an_interrupt_right_after_the_rename_surfaces_as_itself(tmp_path, monkeypatch):
    # Ctrl-C landing between os.replace and the end of save: the new file is in place, the temp file is gone,
    # and the clean-up must not turn the KeyboardInterrupt into a FileNotFoundError
    path = tmp_path / "replay.json"
    buf = ReplayBuffer(4, path=path)
    buf.add([_ex(0)])
    real_replace = os.replace

    def replace_then_interrupt(src, dst):
        real_replace(src, dst)
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", replace_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        buf.save()
    assert [p.name for p in tmp_path.iterdir()] == ["replay.json"] and len(ReplayBuffer.load(path)) == 1


def test_the_buffer_file_declares_its_format(tmp_path):
    path = ReplayBuffer(2, path=tmp_path / "r.json").save()
    state = json.loads(path.read_text())
    assert state["format"] == "rewardkit.raro.replay/1"
    assert set(state) == {"format", "capacity", "seen", "rng_state", "items"}


def test_the_buffer_file_is_read_as_utf8_whatever_the_locale(tmp_path):
    # JSON files are UTF-8 (RFC 8259): a buffer holding non-ASCII text, written as raw UTF-8 by another tool, loads
    # the same under an ASCII-only C locale (no UTF-8 mode, no locale coercion)
    src = ReplayBuffer(2)
    src.add([CriticExample("Combien font 6×7 ?", "42 — évident", "π")])
    path = tmp_path / "u.json"
    path.write_bytes(json.dumps(src.state(), ensure_ascii=False).encode("utf-8"))
    root = str(Path(__file__).resolve().parents[2])  # this checkout's rewardkit, as the root conftest.py arranges
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0",
           "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    code = ("import sys; from rewardkit.raro.replay import ReplayBuffer; "
            "print(ascii(ReplayBuffer.load(sys.argv[1]).items[0].expert))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], env=env, capture_output=True, text=True, timeout=60,
                         cwd=root)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ascii("42 — évident")
    # and in this process (whatever its locale): besides, the call here is what maps this test to `load` for mutmut,
    # whose record of which tests reach which function sees no subprocess
    assert ReplayBuffer.load(path).items[0].expert == "42 — évident"
