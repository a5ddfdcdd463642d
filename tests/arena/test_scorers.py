"""Reasoning Arena scorers: routing (eq. 5), tournaments, order debiasing, soft outcomes, pointwise judges.

Scorer *logic* is checked with a deterministic test double of the judge (it prefers the response whose
text carries the higher ``[q=K]`` tag); the real embedded model runs in the ``model``-marked tests.
"""

import json
import re

import numpy as np
import pytest

from rewardkit.arena.scorers import (
    AdaptivePointwiseScorer,
    ArenaScorer,
    PointwiseScorer,
    TournamentScorer,
    arena_summary,
    expected_outcome,
    nonzero_advantage_count,
    verdict_outcome,
)
from rewardkit.prompts.arena import pointwise_prompt, tournament_prompt
from rewardkit.scoring import get_scorer, scorer_options
from rewardkit.testing import ScriptedJudge
from rewardkit.types import Group, Status


def _pair(text: str):
    a = text.split("[RESPONSE A]")[1].split("[RESPONSE B]")[0]
    b = text.split("[RESPONSE B]")[1].split("Which response is better?")[0]
    return a, b


def _q(s: str) -> int:
    return int(re.search(r"\[q=(\d+)\]", s).group(1))


def QualityJudge(always_a: bool = False) -> ScriptedJudge:  # noqa: N802 - reads like the class it replaces
    """Scripted judge: prefers the response with the higher ``[q=K]`` tag; ``[broken]`` makes it babble
    (generate) or fail (logit). ``always_a`` mimics a maximally position-biased judge."""

    def pair_label(text: str) -> str | None:
        a, b = _pair(text)
        if "[broken]" in a or "[broken]" in b:
            return None
        if always_a:
            return "A"
        qa, qb = _q(a), _q(b)
        return "A" if qa > qb else "B" if qb > qa else "Tie"

    def reply(text: str) -> str:
        if "[RESPONSE A]" in text:
            lab = pair_label(text)
            return "I cannot decide." if lab is None else f"Reasoning...\n\\boxed{{{lab}}}"
        resp = text.split("[RESPONSE]")[1]
        return "hmm" if "[broken]" in resp else f"\\boxed{{{ {3: '1', 2: '0.5'}.get(_q(resp), '0') }}}"

    def probs(text: str, choices):
        if "[RESPONSE A]" not in text:
            return [0.6, 0.3, 0.1]
        lab = pair_label(text)
        if lab is None:
            return Status.ERROR
        return {"A": [0.8, 0.1, 0.1], "B": [0.1, 0.8, 0.1], "Tie": [0.1, 0.1, 0.8]}[lab]

    return ScriptedJudge(reply, probs, model_id="quality-double")


def group(gid, qualities, labels=None, reference="7", **kw):
    return Group(gid, f"problem {gid}", [f"answer [q={q}] so \\boxed{{{reference}}}" for q in qualities],
                 reference=reference, labels=labels, **kw)


def real_groups(path, indices):
    rows = [json.loads(line) for line in open(path)]
    return [Group(rows[i]["id"], rows[i]["problem"], rows[i]["responses"], reference=rows[i]["answer"],
                  labels=rows[i]["correct"]) for i in indices]


# ------------------------------------------------------------------------------------ pure pieces


def test_verdict_outcome_eq7():
    assert verdict_outcome("A", 0.9) == 0.9 and verdict_outcome("B", 0.9) == pytest.approx(0.1)
    assert verdict_outcome("Tie", 0.7) == 0.5
    with pytest.raises(ValueError, match="gamma"):
        verdict_outcome("A", 0.5)
    # a sure "A" in logit mode is eq. 7's gamma; a sure tie is 1/2
    assert expected_outcome([1, 0, 0], 0.8) == 0.8 and expected_outcome([0, 0, 1], 0.8) == 0.5
    assert expected_outcome([0.2, 0.2, 0.6], 1.0) == pytest.approx(0.5)


def test_nonzero_advantage_count():
    assert nonzero_advantage_count(np.ones(8)) == (0, 8)
    assert nonzero_advantage_count(np.array([1, 0, 1, np.nan])) == (3, 3)


def test_prompts_follow_app_d():
    p = tournament_prompt("What is 2+2?", "4", "RA", "RB")
    assert p.startswith("Compare the two solution attempts below")
    assert "The correct answer is: 4" in p and p.index("RA") < p.index("RB")
    assert "\\boxed{A}, \\boxed{B}, or \\boxed{Tie}" in p
    assert "Score it as 1 (completely correct)" in pointwise_prompt("P", "4", "R", "adaptive")
    assert "Begin with \"Here is my evaluation" in pointwise_prompt("P", "4", "R", "rlaif")


# ------------------------------------------------------------------------------------ routing


def test_routing_keeps_verifier_reward_on_diverse_groups_and_batches_rounds():
    judge = QualityJudge()
    groups = [group("ac", range(8), labels=[True] * 8), group("ai", range(8), labels=[False] * 8),
              group("mix", range(8), labels=[True, False] * 4)]
    scores = ArenaScorer(judge=judge, use_labels=True).score(groups)
    ac, ai, mix = scores
    np.testing.assert_array_equal(mix.rewards, [1, 0] * 4)
    assert not mix.stats["routed"] and mix.cost.judge_calls == 0
    for s in (ac, ai):
        assert s.stats["routed"] and s.stats["judge_calls"] == 18  # App. B: 1 + 2 + 3 * 5
        assert s.cost.judge_calls == 18 and s.stats["rounds"] == 7
        assert all(st is Status.OK for st in s.statuses)
        assert np.nanmin(s.rewards) == 0.0 and np.nanmax(s.rewards) == 1.0
    assert ac.stats["all_correct"] and ai.stats["all_incorrect"]
    # one backend call per round for the whole batch: 7 rounds, both routed groups in each call
    assert judge.generate_batches == [2, 4, 6, 6, 6, 6, 6]
    summ = arena_summary(scores)
    assert summ["routed_fraction"] == pytest.approx(2 / 3)
    assert summ["judge_calls_per_routed_group"] == 18
    assert summ["nonzero_adv_fraction_before"] == pytest.approx(8 / 24)
    assert summ["nonzero_adv_fraction_after"] == pytest.approx(1.0)  # qualities all differ


def test_bt_reward_orders_traces_like_the_judge():
    # the double prefers higher q; the live-tournament BT reward must put the best trace on top, the worst
    # at the bottom, and (Spearman) agree with q overall
    q = [3, 7, 0, 5, 1, 6, 2, 4]
    s = ArenaScorer(judge=QualityJudge(), use_labels=True).score([group("g", q, labels=[True] * 8)])[0]
    assert np.argmax(s.rewards) == q.index(7) and np.argmin(s.rewards) == q.index(0)
    from scipy.stats import spearmanr

    assert spearmanr(s.rewards, q)[0] > 0.8


def test_round_robin_win_rate_is_rank_fraction():
    # eq. 8 on a complete graph with a consistent judge: a trace above k others has win rate k / (N - 1)
    q = [2, 0, 5, 1, 4, 3]
    s = ArenaScorer(judge=QualityJudge(), schedule="round-robin", use_labels=True).score([group("g", q, labels=[False] * 6)])[0]
    np.testing.assert_allclose(s.rewards, np.array(q) / 5)
    assert s.stats["judge_calls"] == 15 and s.stats["reward_kind"] == "winrate"


def test_completion_order_drives_the_live_tournament():
    q = list(range(8))
    order = [7, 6, 5, 4, 3, 2, 1, 0]
    s = ArenaScorer(judge=QualityJudge(), use_labels=True).score(
        [group("g", q, labels=[True] * 8, metadata={"completion_order": order})])[0]
    first = s.extra["verdicts"][0]
    assert {first["i"], first["j"]} == {6, 7}  # the second arrival meets the first


def test_invalid_matches_are_dropped_and_isolated_traces_invalid():
    g = group("g", range(8), labels=[True] * 8)
    g.responses[3] = "garbage [q=3] [broken]"
    s = ArenaScorer(judge=QualityJudge(), schedule="round-robin", reward="bt", use_labels=True).score([g])[0]
    assert s.statuses[3] is Status.INVALID and np.isnan(s.rewards[3])
    assert "no valid tournament match" in s.messages[3]
    assert s.stats["invalid_matches"] == 7
    assert all(st is Status.OK for k, st in enumerate(s.statuses) if k != 3)
    assert np.argmax(s.rewards[np.isfinite(s.rewards)]) == 6  # q = 7 is index 7 -> 6th of the valid ones
    assert len(s.extra["invalid_matches"]) == 7 and all(3 in m[:2] for m in s.extra["invalid_matches"])


def test_position_bias_is_measured_and_both_orders_cancel_it():
    g = group("g", range(8), labels=[True] * 8)
    biased = ArenaScorer(judge=QualityJudge(always_a=True), schedule="round-robin", use_labels=True)
    s = biased.score([g])[0]
    assert arena_summary([s])["position_bias"] == pytest.approx(0.5)
    both = ArenaScorer(judge=QualityJudge(always_a=True), schedule="round-robin", both_orders=True, use_labels=True)
    s2 = both.score([g])[0]
    np.testing.assert_allclose(s2.rewards, 0.5)  # every pair averages to a tie
    assert s2.stats["judge_calls"] == 56 and s2.stats["order_agreement"] == 0.0
    # a consistent judge agrees with itself across orders
    s3 = ArenaScorer(judge=QualityJudge(), schedule="round-robin", both_orders=True, use_labels=True).score([g])[0]
    assert s3.stats["order_agreement"] == 1.0


def test_presentation_order_is_seeded_and_randomised():
    g = group("g", range(8), labels=[True] * 8)
    a = ArenaScorer(judge=QualityJudge(), seed=1, use_labels=True).score([g])[0].extra["verdicts"]
    b = ArenaScorer(judge=QualityJudge(), seed=1, use_labels=True).score([g])[0].extra["verdicts"]
    assert [v["i_first"] for v in a] == [v["i_first"] for v in b]
    firsts = [v["i_first"] for v in a]
    assert 0 < sum(firsts) < len(firsts)


def test_logit_mode_uses_verdict_probs():
    judge = QualityJudge()
    s = ArenaScorer(judge=judge, mode="logit", schedule="round-robin", use_labels=True).score(
        [group("g", [0, 1, 2], labels=[True] * 3)])[0]
    assert judge.generate_batches == [] and judge.verdict_batches == [3]
    # win rates with outcomes 0.8/0.2 (+0.1 tie mass * 1/2 = 0.85 / 0.15): top trace wins 0.85 on average
    np.testing.assert_allclose(s.rewards, [0.15, 0.5, 0.85])


def test_uncertainty_schedule_respects_budget():
    s = ArenaScorer(judge=QualityJudge(), schedule="uncertainty", budget=10, use_labels=True).score(
        [group("g", range(8), labels=[True] * 8)])[0]
    assert s.stats["judge_calls"] == 10 and all(st is Status.OK for st in s.statuses)


def test_no_reference_abstains_in_arena_but_tournament_still_judges():
    g = group("g", range(4), reference=None)
    s = ArenaScorer(judge=QualityJudge()).score([g])[0]
    assert all(st is Status.ABSTAIN for st in s.statuses) and s.cost.judge_calls == 0
    t = TournamentScorer(judge=QualityJudge()).score([g])[0]
    assert t.stats["routed"] and t.stats["judge_calls"] == 6
    assert np.argmax(t.rewards) == 3


def test_tournament_scorer_judges_every_group():
    groups = [group("mix", range(4), labels=[True, False, True, False]), group("ac", range(4), labels=[True] * 4)]
    scores = TournamentScorer(judge=QualityJudge(), use_labels=True).score(groups)
    assert all(s.stats["routed"] for s in scores)
    assert [s.stats["judge_calls"] for s in scores] == [6, 6]
    assert arena_summary(scores)["routed_fraction"] == 1.0


def test_real_verifier_routes_real_rollouts(rollouts_path):
    # group 3 is all-incorrect, 6 is mixed (3/8 correct) in the shared rollouts: the math-verify
    # verifier (not the labels) must reproduce that split and route only group 3
    groups = real_groups(rollouts_path, [3, 6])
    for g in groups:
        g.responses = [r + f" [q={k}]" for k, r in enumerate(g.responses)]
    judge = QualityJudge()
    wrong, mixed = ArenaScorer(judge=judge, mode="logit").score(groups)
    assert wrong.stats["routed"] and wrong.stats["all_incorrect"]
    assert not mixed.stats["routed"]
    np.testing.assert_array_equal(mixed.rewards, np.array(groups[1].labels, float))
    assert mixed.cost.verifier_calls + mixed.cost.cache_hits == 8  # each check once: run, or served from the cache


# ------------------------------------------------------------------------------------ pointwise


def test_pointwise_scores_every_response_in_one_call():
    judge = QualityJudge()
    groups = [group("a", [3, 2, 1], labels=[True] * 3), group("b", [3, 3, 0], labels=[True, False, True])]
    scores = PointwiseScorer(judge=judge, use_labels=True).score(groups)
    assert judge.generate_batches == [6]
    np.testing.assert_allclose(scores[0].rewards, [1, 0.5, 0])
    np.testing.assert_allclose(scores[1].rewards, [1, 1, 0])
    assert all(s.stats["judge_calls"] == 3 for s in scores)


def test_adaptive_pointwise_routes_and_masks_invalid():
    judge = QualityJudge()
    ac = group("ac", [3, 2, 1], labels=[True] * 3)
    ac.responses[1] = "[q=2] [broken]"
    mix = group("mix", [3, 3, 0], labels=[True, False, True])
    s_ac, s_mix = AdaptivePointwiseScorer(judge=judge, use_labels=True).score([ac, mix])
    assert judge.generate_batches == [3]
    assert s_ac.statuses[1] is Status.INVALID and np.isnan(s_ac.rewards[1])
    np.testing.assert_allclose(s_ac.rewards[[0, 2]], [1, 0])
    np.testing.assert_array_equal(s_mix.rewards, [1, 0, 1])
    assert not s_mix.stats["routed"]


def test_pointwise_logit_mode_expected_score():
    judge = QualityJudge()
    s = PointwiseScorer(judge=judge, mode="logit", use_labels=True).score([group("a", [1, 2], labels=[True, True])])[0]
    np.testing.assert_allclose(s.rewards, 0.6 + 0.5 * 0.3)
    assert judge.verdict_batches == [2]


# ------------------------------------------------------------------------------------ registry


def test_registry_builds_scorers_with_options():
    s = get_scorer("arena", judge=QualityJudge(), schedule="round-robin", gamma="0.9", both_orders="true")
    assert isinstance(s, ArenaScorer) and s.options.gamma == 0.9 and s.options.both_orders is True
    t = get_scorer("tournament", judge=QualityJudge(), gamma="0.9")
    assert t.options.schedule == "round-robin" and t.options.gamma == 0.9  # the variant changes one default
    for name in ("arena", "tournament", "pointwise", "adaptive-pointwise"):
        helps = {o.name: o.help for o in scorer_options(name)}
        assert helps["judge"] and helps["mode"]
    with pytest.raises(ValueError, match="schedule"):
        ArenaScorer(judge=QualityJudge(), schedule="swiss")
    # the uncertainty schedule's posterior needs the prior: refused with the options, before any judge call
    with pytest.raises(ValueError, match=r"option 'l2': must be > 0 for schedule=uncertainty .*got 0.0"):
        ArenaScorer(judge=QualityJudge(), schedule="uncertainty", l2=0.0)
    assert ArenaScorer(judge=QualityJudge(), schedule="live", l2=0.0).options.l2 == 0.0  # the plain MLE elsewhere


# ------------------------------------------------------------------------------ real embedded model
# Few, tiny calls (the CPU is shared): they check mechanics (shapes, statuses, call counts), not wisdom.

TINY = ["2 + 3 = 5. \\boxed{5}", "Adding gives \\boxed{5}.", "Count 3, 4, 5. \\boxed{5}"]


@pytest.mark.model
def test_arena_live_logit_with_embedded_model(judge_backend):
    g = Group("tiny", "What is 2 + 3?", TINY, reference="5")
    s = ArenaScorer(judge=judge_backend, mode="logit").score([g])[0]
    assert s.stats["routed"] and s.stats["all_correct"]
    assert s.stats["judge_calls"] == 3 and s.cost.judge_calls == 3  # 1 + 2 requests, no judge cache here
    assert s.cost.prompt_tokens > 0 and s.stats["rounds"] == 2
    assert all(st is Status.OK for st in s.statuses)
    assert np.all((s.rewards >= 0) & (s.rewards <= 1)) and s.rewards.shape == (3,)
    assert arena_summary([s])["position_bias"] is not None


@pytest.mark.model
def test_tournament_generate_with_embedded_model(judge_backend):
    g = Group("tiny", "What is 2 + 3?", TINY[:2], reference="5")
    s = TournamentScorer(judge=judge_backend, mode="generate", max_tokens=8).score([g])[0]
    assert s.stats["judge_calls"] == 1 and s.cost.completion_tokens > 0
    # an 8-token reply rarely ends in a boxed verdict: the pair is either a valid match or a dropped one,
    # and a dropped one leaves both traces invalid (no made-up reward)
    assert len(s.extra["matches"]) + len(s.extra["invalid_matches"]) == 1
    for st, r in zip(s.statuses, s.rewards, strict=True):
        assert (st is Status.OK) == bool(np.isfinite(r))
        assert st is (Status.OK if s.extra["matches"] else Status.INVALID)


@pytest.mark.model
def test_pointwise_scorers_with_embedded_model(judge_backend):
    g = Group("tiny", "What is 2 + 3?", TINY[:1], reference="5")  # one response: non-diverse, routed
    for scorer in (PointwiseScorer(judge=judge_backend, rubric="adaptive", mode="logit"),
                   AdaptivePointwiseScorer(judge=judge_backend, mode="logit")):
        s = scorer.score([g])[0]
        assert s.stats["routed"] and s.stats["judge_calls"] == 1
        assert s.cost.judge_calls == 1 and all(st is Status.OK for st in s.statuses)  # no judge cache here
        assert np.all((s.rewards >= 0) & (s.rewards <= 1))


def test_judge_reads_the_response_trunk_unless_told_to_keep_the_reasoning():
    """The paper judges the response trunk (the text after the reasoning block); view=full keeps it."""
    from rewardkit.answers import response_trunk
    from rewardkit.arena.scorers import ArenaScorer, PointwiseScorer
    from rewardkit.testing import ScriptedJudge
    from rewardkit.types import Group

    resp = [f"<think>SECRET-REASONING-{i}</think>\nSo the answer is \\boxed{{2}}." for i in range(3)]
    g = Group("t", "What is 1+1?", resp, reference="2")
    for cls in (ArenaScorer, PointwiseScorer):
        judge = ScriptedJudge(probs=lambda prompt, choices: [1.0 / len(choices)] * len(choices))
        cls(judge=judge, mode="logit").score([g])
        assert judge.prompts and not any("SECRET-REASONING" in p for p in judge.prompts)
        assert all("So the answer is" in p for p in judge.prompts)
        full = ScriptedJudge(probs=lambda prompt, choices: [1.0 / len(choices)] * len(choices))
        cls(judge=full, mode="logit", view="full").score([g])
        assert full.prompts and all("SECRET-REASONING" in p for p in full.prompts)
    assert response_trunk("<think>unfinished reasoning") == ""
    assert response_trunk("no tags at all") == "no tags at all"
    assert response_trunk("<think>a</think>b</think> final") == "final"


def test_auto_mode_follows_the_judge():
    from rewardkit.scoring import resolve_mode

    assert resolve_mode("auto", "smollm2") == "logit" and resolve_mode("auto", "embedded?dtype=float32") == "logit"
    assert resolve_mode("auto", "http://127.0.0.1:8000/v1") == "generate"
    assert resolve_mode("auto", "vllm:Qwen/Qwen2.5-7B-Instruct") == "generate"
    assert resolve_mode("generate", "smollm2") == "generate"
    assert resolve_mode("auto", ScriptedJudge(probs=lambda prompt, choices: [1 / 3] * 3)) == "generate"


@pytest.mark.model
def test_score_arena_with_its_defaults_gives_verdicts_from_the_embedded_judge(tmp_path, judge_backend):
    """`rewardkit score --scorer arena` with no options: the embedded judge, mode auto (-> logit here)."""
    import json

    from rewardkit.cli.app import app
    from typer.testing import CliRunner

    rows = tmp_path / "rows.jsonl"  # all correct: not diverse, so Reasoning Arena routes the group to the judge
    rows.write_text(json.dumps({"problem": "What is 2+3?", "answer": "5",
                                "responses": [r"2+3 = \boxed{5}", r"Adding, \boxed{5}", r"It is \boxed{5}."]}) + "\n")
    out = tmp_path / "out.jsonl"
    res = CliRunner().invoke(app, ["score", str(rows), "--scorer", "arena", "--out", str(out)])
    assert res.exit_code == 0, res.output
    row = json.loads(out.read_text().splitlines()[0])
    assert row["statuses"] == ["ok"] * 3 and all(r is not None for r in row["rewards"])
    assert row["cost"]["judge_calls"] > 0  # the judge really ran
