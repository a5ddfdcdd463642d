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
    # the default gamma = 1 is the hard outcome: A wins outright, B loses outright
    assert (verdict_outcome("A"), verdict_outcome("B"), verdict_outcome("Tie")) == (1.0, 0.0, 0.5)
    # gamma's range (1/2, 1]: open at 1/2, closed at 1
    assert verdict_outcome("A", 1.0) == 1.0 and verdict_outcome("B", 0.51) == pytest.approx(0.49)
    for bad in (0.5, 1.01, 1.5, 0.0):
        with pytest.raises(ValueError, match=re.escape(f"arena: gamma must lie in (1/2, 1] (eq. 7), got {bad}")):
            verdict_outcome("A", bad)
    # a sure "A" in logit mode is eq. 7's gamma; a sure tie is 1/2
    assert expected_outcome([1, 0, 0], 0.8) == 0.8 and expected_outcome([0, 0, 1], 0.8) == 0.5
    assert expected_outcome([0.2, 0.2, 0.6], 1.0) == pytest.approx(0.5)
    # default gamma = 1: a sure A is 1, a sure B is 0
    assert expected_outcome([1, 0, 0]) == 1.0 and expected_outcome([0, 1, 0]) == 0.0
    # (A, B, Tie) = (0.2, 0.5, 0.3), gamma 0.8: 0.8 * 0.2 + 0.5 * 0.3 + 0.2 * 0.5 = 0.41 (B's mass adds 1 - gamma)
    assert expected_outcome([0.2, 0.5, 0.3], 0.8) == pytest.approx(0.41)


def test_nonzero_advantage_count():
    assert nonzero_advantage_count(np.ones(8)) == (0, 8)
    assert nonzero_advantage_count(np.array([1, 0, 1, np.nan])) == (3, 3)
    # every response invalid: nothing counted, nothing valid; one valid response has advantage 0
    assert nonzero_advantage_count(np.full(4, np.nan)) == (0, 0)
    assert nonzero_advantage_count(np.array([np.nan, 0.5, np.nan])) == (0, 1)
    # equal rewards have advantage exactly 0: not counted even with eps = 0 (the count is |A| > eps)
    assert nonzero_advantage_count(np.full(4, 0.5), eps=0.0) == (0, 4)
    # a row read back from JSON writes a missing reward as null: it counts as invalid, like NaN
    assert nonzero_advantage_count([1.0, None, 0.0]) == (2, 2)


def test_prompts_follow_app_d():
    p = tournament_prompt("What is 2+2?", "4", "RA", "RB")
    assert p.startswith("Compare the two solution attempts below")
    assert "The correct answer is: 4" in p and p.index("RA") < p.index("RB")
    assert "\\boxed{A}, \\boxed{B}, or \\boxed{Tie}" in p
    assert "Score it as 1 (completely correct)" in pointwise_prompt("P", "4", "R", "adaptive")
    assert "Begin with \"Here is my evaluation" in pointwise_prompt("P", "4", "R", "rlaif")


def test_diversity_components_of_verifier_rewards():
    from rewardkit.arena.scorers import diversity_components
    from rewardkit.verifier import VerifiedGroup

    def comps(rewards, available=True):
        r = np.array(rewards, float)
        sts = [Status.OK if np.isfinite(x) else Status.TIMEOUT for x in r]
        return diversity_components(VerifiedGroup(r, sts, [None] * len(r), available))

    assert comps([1, 1, 1]) == {"diverse": False, "all_correct": True, "all_incorrect": False,
                                "nonzero_adv_before": 0, "valid_before": 3}
    # a timed-out check is left out: the two valid rewards are both 0
    assert comps([0, np.nan, 0]) == {"diverse": False, "all_correct": False, "all_incorrect": True,
                                     "nonzero_adv_before": 0, "valid_before": 2}
    assert comps([1, 0, np.nan, 1]) == {"diverse": True, "all_correct": False, "all_incorrect": False,
                                        "nonzero_adv_before": 3, "valid_before": 3}
    unknown = {"diverse": None, "all_correct": None, "all_incorrect": None, "nonzero_adv_before": None,
               "valid_before": None}
    # every check timed out: no verifier reward to decide diversity on (not "non-diverse")
    assert comps([np.nan, np.nan]) == unknown
    assert comps([np.nan, np.nan], available=False) == unknown


def _summary_group(gid, stats, firsts=None):
    from rewardkit.types import GroupScore

    return GroupScore(gid, np.zeros(2), [Status.OK] * 2, stats=stats,
                      extra={} if firsts is None else {"first_shown_outcomes": firsts})


def test_arena_summary_of_hand_built_groups():
    ac = _summary_group("ac", {"routed": True, "all_correct": True, "all_incorrect": False, "judge_calls": 18,
                               "invalid_matches": 2, "nonzero_adv_before": 0, "valid_before": 8,
                               "nonzero_adv_after": 8, "valid_after": 8, "order_agreement": 0.75},
                        firsts=[1.0, 1.0, 0.5, 1.0])
    # every judge call failed: every trace invalid after routing, no first-shown outcome, no agreement
    ai = _summary_group("ai", {"routed": True, "all_correct": False, "all_incorrect": True, "judge_calls": 6,
                               "invalid_matches": 6, "nonzero_adv_before": 0, "valid_before": 4,
                               "nonzero_adv_after": 0, "valid_after": 0, "order_agreement": None}, firsts=[])
    # reward-diverse: kept its verifier reward, never judged (no invalid_matches entry, as ArenaScorer writes it)
    mix = _summary_group("mix", {"routed": False, "all_correct": False, "all_incorrect": False, "judge_calls": 0,
                                 "nonzero_adv_before": 3, "valid_before": 3, "nonzero_adv_after": 3,
                                 "valid_after": 3})
    assert arena_summary([ac, ai, mix]) == {
        "groups": 3, "routed": 2, "routed_fraction": pytest.approx(2 / 3),
        "routed_all_correct": 1, "routed_all_incorrect": 1,
        "judge_calls": 24, "judge_calls_per_routed_group": 12.0, "invalid_matches": 8,
        "nonzero_adv_fraction_before": pytest.approx(3 / 15),  # (0 + 0 + 3) / (8 + 4 + 3)
        "nonzero_adv_fraction_after": 1.0,  # (8 + 0 + 3) / (8 + 0 + 3)
        "position_bias": pytest.approx(0.875 - 0.5),
        "order_agreement": 0.75,
    }
    # two groups with agreement: their mean
    ac2 = _summary_group("ac2", {**ac.stats, "order_agreement": 0.25})
    assert arena_summary([ac, ac2])["order_agreement"] == pytest.approx(0.5)


def test_arena_summary_defaults_for_missing_counts_and_empty_batches():
    # a group from another scorer (no arena stats) and a routed one that reports no call or match counts:
    # a missing count is 0, and the summary only adds the counts up (max(valid, 1) guards an empty total)
    other = _summary_group("other", {})
    routed = _summary_group("r", {"routed": True, "nonzero_adv_before": 1, "valid_before": 1,
                                  "nonzero_adv_after": 1, "valid_after": 1})
    assert arena_summary([other, routed]) == {
        "groups": 2, "routed": 1, "routed_fraction": 0.5, "routed_all_correct": 0, "routed_all_incorrect": 0,
        "judge_calls": 0, "judge_calls_per_routed_group": 0.0, "invalid_matches": 0,
        "nonzero_adv_fraction_before": 1.0, "nonzero_adv_fraction_after": 1.0,
        "position_bias": None, "order_agreement": None,
    }
    # nothing routed: no calls per routed group; no verifier count at all: no "before" fraction
    assert arena_summary([other]) == {
        "groups": 1, "routed": 0, "routed_fraction": 0.0, "routed_all_correct": 0, "routed_all_incorrect": 0,
        "judge_calls": 0, "judge_calls_per_routed_group": 0.0, "invalid_matches": 0,
        "nonzero_adv_fraction_before": None, "nonzero_adv_fraction_after": 0.0,
        "position_bias": None, "order_agreement": None,
    }
    assert arena_summary([]) == {
        "groups": 0, "routed": 0, "routed_fraction": 0.0, "routed_all_correct": 0, "routed_all_incorrect": 0,
        "judge_calls": 0, "judge_calls_per_routed_group": 0.0, "invalid_matches": 0,
        "nonzero_adv_fraction_before": None, "nonzero_adv_fraction_after": 0.0,
        "position_bias": None, "order_agreement": None,
    }


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


def _arena_pairs(s):
    """(i, j) of every judged pair of one scored group, in the order the judge was asked."""
    return [(v["i"], v["j"]) for v in s.extra["verdicts"]]


def _tagged_reply(text: str):
    """QualityJudge's verdicts, except that a shown ``[timeout]``, ``[crash]`` or ``[cutoff]`` response fails
    the call (a timeout with an error text, an error without one, a verdict cut off by the length limit)."""
    from rewardkit.backends.base import Completion

    a, b = _pair(text)
    if "[timeout]" in a + b:
        return Status.TIMEOUT
    if "[crash]" in a + b:
        return Completion([], Status.ERROR)
    if "[cutoff]" in a + b:
        return Completion(["Reasoning...\n\\boxed{A}"], prompt_tokens=10, completion_tokens=5, finish_reasons=["length"])
    if "[broken]" in a + b:
        return "I cannot decide."
    return "\\boxed{%s}" % ("A" if _q(a) > _q(b) else "B" if _q(b) > _q(a) else "Tie")


def test_arena_options_refuse_bad_values_with_exact_messages():
    def refused(**kw):
        with pytest.raises(ValueError) as e:
            ArenaScorer(judge=QualityJudge(), **kw)
        return str(e.value)

    assert refused(gamma=0.5) == "option 'gamma': must lie in (1/2, 1] (eq. 7), got 0.5"  # eq. 7: gamma > 1/2
    assert refused(gamma=1.5) == "option 'gamma': must lie in (1/2, 1] (eq. 7), got 1.5"
    assert refused(max_tokens=0) == "option 'max_tokens': must be >= 1, got 0"
    assert refused(budget=0) == "option 'budget': must be >= 1, got 0"
    assert refused(temperature=-0.1) == "option 'temperature': must be >= 0, got -0.1"
    assert refused(l2=-0.5) == "option 'l2': must be >= 0, got -0.5"
    # the edges themselves are allowed
    ok = ArenaScorer(judge=QualityJudge(), schedule="round-robin", gamma=1.0, max_tokens=1, budget=1, temperature=0.0,
                     l2=0.0).options
    assert (ok.gamma, ok.max_tokens, ok.budget, ok.temperature, ok.l2) == (1.0, 1, 1, 0.0, 0.0)
    assert ArenaScorer(judge=QualityJudge(), gamma=0.51).options.gamma == 0.51


def test_two_responses_are_routed_one_response_and_no_reference_are_not():
    judge = QualityJudge()
    groups = [group("two", [0, 1], labels=[True, True]), group("one", [5], labels=[True]),
              group("mix", [0, 1], labels=[True, False]), group("noref", [0, 1], reference=None)]
    two, one, mix, noref = ArenaScorer(judge=judge, use_labels=True).score(groups)
    assert [s.group_id for s in (two, one, mix, noref)] == ["two", "one", "mix", "noref"]
    # two all-correct responses: not diverse, one pair for the judge (q=1 beats q=0)
    assert two.stats["routed"] and two.stats["judge_calls"] == 1 and judge.generate_batches == [1]
    np.testing.assert_array_equal(two.rewards, [0.0, 1.0])
    # a single response cannot be ranked; a diverse group keeps its verifier reward; neither asks the judge
    for s, want in ((one, [1.0]), (mix, [1.0, 0.0])):
        assert s.stats["routed"] is False and s.stats["judge_calls"] == 0 and s.cost.judge_calls == 0
        np.testing.assert_array_equal(s.rewards, want)
        assert all(st is Status.OK for st in s.statuses) and s.messages is None
    # no reference and no labels: routing cannot be decided, every response abstains, saying why
    assert noref.stats["routed"] is False and noref.stats["judge_calls"] == 0
    assert noref.statuses == [Status.ABSTAIN] * 2 and np.isnan(noref.rewards).all()
    assert noref.messages == ["no reference answer or labels: cannot decide routing"] * 2
    # the tournament baseline judges every group, but one response still makes no tournament
    t_one, t_two = TournamentScorer(judge=QualityJudge(), use_labels=True).score(
        [group("one", [5], labels=[True]), group("two", [0, 1], labels=[True, False])])
    assert t_one.group_id == "one" and t_one.statuses == [Status.ABSTAIN] and np.isnan(t_one.rewards[0])
    assert t_one.messages == ["fewer than two responses: no tournament"]
    assert t_one.stats["routed"] is False and t_one.stats["judge_calls"] == 0
    assert t_two.stats["routed"] and t_two.stats["judge_calls"] == 1


def test_live_schedule_meets_best_worst_median_and_random_schedule_follows_the_seed():
    g = group("g", range(8), labels=[True] * 8)  # arrivals in index order, q = index: each newcomer wins all
    # App. B anchors, by hand: after 3 beats 0, 1, 2 the leaderboard is [3, 2, 1, 0] (win rates 1, 2/3,
    # 1/3, 0), so 4 meets best 3, worst 0, median 2; then [4, 3, 2, 1, 0] -> 5 meets 4, 0, 2; then
    # [5, 3, 4, 2, 1, 0] (3 and 4 tie at 3/4, arrival order kept) -> 6 meets 5, 0, 4; then
    # [6, 3, 5, 4, 2, 1, 0] -> 7 meets 6, 0, 4
    anchors = [(1, 0), (2, 0), (2, 1), (3, 0), (3, 1), (3, 2), (4, 3), (4, 0), (4, 2),
               (5, 4), (5, 0), (5, 2), (6, 5), (6, 0), (6, 4), (7, 6), (7, 0), (7, 4)]
    randoms = []
    for seed in range(4):
        live = ArenaScorer(judge=QualityJudge(), seed=seed, use_labels=True).score([g])[0]
        assert _arena_pairs(live) == anchors  # the anchors depend on verdicts only, not on the seed
        assert live.stats["schedule"] == "live" and live.stats["rounds"] == 7
        rnd = ArenaScorer(judge=QualityJudge(), schedule="random", seed=seed, use_labels=True).score([g])[0]
        pairs = _arena_pairs(rnd)
        assert rnd.stats["judge_calls"] == 18 and rnd.stats["schedule"] == "random"  # 1 + 2 + 3 * 5
        assert pairs[:6] == anchors[:6]  # the first arrivals meet everyone before them
        for new in range(3, 8):  # then 3 distinct opponents among the arrived ones
            opp = [j for i, j in pairs if i == new]
            assert len(set(opp)) == 3 and all(j < new for j in opp)
        randoms.append(pairs)
    assert len({tuple(p) for p in randoms}) > 1  # the seed draws the random opponents


def test_uncertainty_schedule_follows_the_seed_and_the_l2_option():
    g = group("g", [3, 7, 0, 5, 1, 6, 2, 4], labels=[True] * 8)

    def pairs(**kw):
        s = ArenaScorer(judge=QualityJudge(), schedule="uncertainty", use_labels=True, **kw).score([g])[0]
        assert s.stats["judge_calls"] == 16 and s.stats["schedule"] == "uncertainty"  # budget 2N
        return _arena_pairs(s)

    firsts = {tuple(sorted(tuple(sorted(p)) for p in pairs(seed=seed)[:4])) for seed in range(3)}
    assert len(firsts) > 1  # round 1 (a random perfect matching) is drawn with the scorer's seed
    assert pairs(seed=0) == pairs(seed=0)
    # the Laplace posterior that picks later pairs uses the option's prior weight
    weak, strong = pairs(seed=0, l2=0.05), pairs(seed=0, l2=20.0)
    assert weak[:4] == strong[:4] and weak[4:] != strong[4:]


def test_groups_of_different_sizes_share_rounds_and_one_bradley_terry_fit():
    judge = QualityJudge()
    small, big = ArenaScorer(judge=judge, use_labels=True).score(
        [group("small", [0, 1], labels=[True] * 2), group("big", [2, 0, 3, 1], labels=[True] * 4)])
    # live: the small group is done after round 1; the big one goes on alone (1 + 2 + 3 pairs)
    assert judge.generate_batches == [2, 2, 3]
    assert small.stats["judge_calls"] == 1 and big.stats["judge_calls"] == 6
    assert small.stats["rounds"] == 1 and big.stats["rounds"] == 3
    np.testing.assert_array_equal(small.rewards, [0.0, 1.0])
    assert list(np.argsort(big.rewards)) == [1, 3, 0, 2] and big.rewards.min() == 0 and big.rewards.max() == 1
    for s in (small, big):
        assert s.stats["reward_kind"] == "bt"
        beta = s.extra["bt_strengths"]
        assert beta.dtype == np.float64 and abs(beta.sum()) < 1e-9  # eq. 10 with the L2 prior: zero mean


def test_reward_kind_follows_the_reward_option():
    g = group("g", [0, 1, 2], labels=[True] * 3)  # live on 3: (1, 0), (2, 0), (2, 1): every pair once

    def run(**kw):
        return ArenaScorer(judge=QualityJudge(), gamma=0.75, use_labels=True, **kw).score([g])[0]

    for kw in ({}, {"reward": "bt"}, {"schedule": "round-robin", "reward": "bt"}):
        s = run(**kw)
        assert s.stats["reward_kind"] == "bt", kw
        beta = s.extra["bt_strengths"]
        assert beta.dtype == np.float64 and beta[0] < beta[1] < beta[2] and abs(beta.sum()) < 1e-9
        # Sec. 4: the reward is the min-max normalised log-strength (beta_1 = 0 by symmetry -> 1/2)
        np.testing.assert_allclose(s.rewards, [0.0, 0.5, 1.0], atol=1e-9)
    for kw in ({"schedule": "round-robin"}, {"reward": "winrate"}, {"schedule": "round-robin", "reward": "winrate"}):
        s = run(**kw)
        assert s.stats["reward_kind"] == "winrate" and "bt_strengths" not in s.extra, kw
        np.testing.assert_allclose(s.rewards, [0.25, 0.5, 0.75])  # eq. 8 with gamma = 0.75 (eq. 7)
    assert run(schedule="round-robin").stats["schedule"] == "round-robin"

    # the L2 prior of eq. 10 pulls the strengths together: a weak prior spreads them more
    def spread(l2):
        beta = run(l2=l2).extra["bt_strengths"]
        return beta.max() - beta.min()

    assert spread(0.1) > spread(1.0) > spread(10.0)


@pytest.mark.filterwarnings("error")  # a failed pair is no numpy "mean of empty slice" either
def test_failed_judge_calls_are_invalid_matches_with_their_status_and_message():
    from rewardkit.verdicts import parse_boxed_choice

    babble = parse_boxed_choice("I cannot decide.").message
    g = group("g", [0, 1, 2, 3, 4], labels=[True] * 5)
    for k, tag in ((2, "[timeout]"), (3, "[crash]"), (4, "[broken]")):
        g.responses[k] += " " + tag
    judge = ScriptedJudge(_tagged_reply)
    s = ArenaScorer(judge=judge, schedule="round-robin", reward="bt", use_labels=True).score([g])[0]
    assert judge.generate_batches == [10]
    timeout, crash = "scripted timeout", "judge call failed (error)"
    # round-robin order: (0,1) (0,2) (0,3) (0,4) (1,2) (1,3) (1,4) (2,3) (2,4) (3,4); a timeout wins over a crash
    assert s.extra["invalid_matches"] == [[0, 2, timeout], [0, 3, crash], [0, 4, babble], [1, 2, timeout],
                                          [1, 3, crash], [1, 4, babble], [2, 3, timeout], [2, 4, timeout],
                                          [3, 4, crash]]
    assert s.extra["matches"] == [[0, 1, 0.0]]  # q=1 beats q=0
    want = {(0, 2): ("timeout", timeout), (0, 3): ("error", crash), (0, 4): ("invalid", babble),
            (1, 2): ("timeout", timeout), (1, 3): ("error", crash), (1, 4): ("invalid", babble),
            (2, 3): ("timeout", timeout), (2, 4): ("timeout", timeout), (3, 4): ("error", crash)}
    for v in s.extra["verdicts"]:
        assert set(v) == {"i", "j", "i_first", "outcome_first", "status", "message"}
        if (v["i"], v["j"]) == (0, 1):
            assert (v["status"], v["message"]) == ("ok", None)
            assert v["outcome_first"] == (0.0 if v["i_first"] else 1.0)  # 1 is better, whichever is shown first
        else:
            assert (v["status"], v["message"], v["outcome_first"]) == (*want[v["i"], v["j"]], None)
    assert s.stats["invalid_matches"] == 9 and s.stats["pairs_judged"] == 10 and s.stats["judge_calls"] == 10
    assert s.stats["rounds"] == 1 and s.stats["order_agreement"] is None  # one order per pair: nothing to agree on
    # every request costs a call; only the answered ones (1 verdict, 2 babbles) report tokens
    assert (s.cost.judge_calls, s.cost.prompt_tokens, s.cost.completion_tokens) == (10, 30, 15)
    # traces 2, 3, 4 have no valid match: invalid, no reward, never a made-up tie
    assert s.statuses == [Status.OK, Status.OK] + [Status.INVALID] * 3
    assert s.messages == [None, None] + ["no valid tournament match for this trace (every judge call failed)"] * 3
    np.testing.assert_array_equal(s.rewards, [0.0, 1.0, np.nan, np.nan, np.nan])
    beta = s.extra["bt_strengths"]
    assert beta.dtype == np.float64 and np.isnan(beta[2:]).all() and beta[0] < 0 < beta[1]
    assert beta[0] == pytest.approx(-beta[1])
    # both orders: a pair whose two calls failed keeps both reasons
    both = ArenaScorer(judge=ScriptedJudge(_tagged_reply), schedule="round-robin", both_orders=True,
                       use_labels=True).score([g])[0]
    assert both.extra["invalid_matches"][:2] == [[0, 2, f"{timeout}; {timeout}"], [0, 3, f"{crash}; {crash}"]]
    assert both.stats["judge_calls"] == 20 and both.stats["pairs_judged"] == 10


def test_a_whole_group_of_failed_calls_is_invalid_beside_a_judged_group():
    g_bad = group("bad", [0, 1, 2], labels=[True] * 3)
    g_bad.responses = [r + " [timeout]" for r in g_bad.responses]
    for reward in ("bt", "winrate"):
        bad, ok = ArenaScorer(judge=ScriptedJudge(_tagged_reply), reward=reward, use_labels=True).score(
            [g_bad, group("ok", [0, 2, 1], labels=[True] * 3)])
        assert bad.statuses == [Status.INVALID] * 3 and np.isnan(bad.rewards).all()
        assert bad.stats["invalid_matches"] == 3 and bad.extra["matches"] == []
        assert ok.statuses == [Status.OK] * 3
        np.testing.assert_allclose(ok.rewards, [0.0, 1.0, 0.5], atol=1e-9)


def test_cut_off_verdicts_are_invalid_not_read():
    from rewardkit.backends.base import Completion

    g = group("g", [0, 1, 2], labels=[True] * 3)
    g.responses[2] += " [cutoff]"
    s = ArenaScorer(judge=ScriptedJudge(_tagged_reply), schedule="round-robin", use_labels=True).score([g])[0]
    assert [m[:2] for m in s.extra["invalid_matches"]] == [[0, 2], [1, 2]]
    assert all("stopped for length" in m[2] for m in s.extra["invalid_matches"])
    assert s.statuses[2] is Status.INVALID and s.extra["matches"] == [[0, 1, 0.0]]
    # the rubric judge too: a cut-off "\boxed{1}" is no score
    cut = ScriptedJudge(lambda p: Completion(["\\boxed{1}"], finish_reasons=["length"]) if "[q=1]" in p else "\\boxed{0}")
    p = PointwiseScorer(judge=cut, use_labels=True).score([group("p", [0, 1], labels=[True] * 2)])[0]
    assert p.statuses == [Status.OK, Status.INVALID] and "stopped for length" in p.messages[1]


def test_gamma_softens_generate_verdicts():
    s = ArenaScorer(judge=QualityJudge(), schedule="round-robin", gamma=0.75, use_labels=True).score(
        [group("g", [0, 1, 2], labels=[True] * 3)])[0]
    np.testing.assert_allclose(s.rewards, [0.25, 0.5, 0.75])  # eq. 7: a win is worth 0.75, a loss 0.25
    assert set(s.extra["first_shown_outcomes"]) <= {0.25, 0.75} and len(s.extra["first_shown_outcomes"]) == 3


def test_logit_mode_asks_the_verdict_choices_and_keeps_failures():
    from rewardkit.backends.base import VerdictResult
    from rewardkit.prompts.arena import POINTWISE_VERDICT_PREFIX, TOURNAMENT_VERDICT_PREFIX

    def probs(text, choices):
        a, b = _pair(text)
        if "[timeout]" in a + b:  # failed, even with three numbers attached
            return VerdictResult(np.array([0.8, 0.1, 0.1]), Status.TIMEOUT, error="backend timed out")
        if "[short]" in a + b:  # "ok" but not one probability per choice
            return VerdictResult(np.array([0.5, 0.5]))
        if "[silent]" in a + b:  # failed without a reason
            return VerdictResult(np.array([]), Status.ERROR)
        return [0.6, 0.3, 0.1] if _q(a) > _q(b) else [0.3, 0.6, 0.1]  # (A, B, Tie): the better one, mildly

    g = group("g", [0, 1, 2, 3, 4], labels=[True] * 5)
    for k, tag in ((2, "[timeout]"), (3, "[short]"), (4, "[silent]")):
        g.responses[k] += " " + tag
    judge = ScriptedJudge(probs=probs)
    s = ArenaScorer(judge=judge, mode="logit", schedule="round-robin", gamma=0.75, use_labels=True).score([g])[0]
    for r in judge.requests:
        assert tuple(r.choices) == ("A", "B", "Tie") and r.assistant_prefix == TOURNAMENT_VERDICT_PREFIX
        assert len(r.messages) == 1 and r.messages[0]["role"] == "user"
    # eq. 7 averaged over (A, B, Tie): 0.75 * 0.6 + 0.25 * 0.3 + 0.5 * 0.1 = 0.575 for the better trace
    np.testing.assert_allclose(s.rewards[:2], [0.425, 0.575])
    none = "judge returned no verdict probabilities"
    assert s.extra["invalid_matches"] == [[0, 2, "backend timed out"], [0, 3, none], [0, 4, none],
                                          [1, 2, "backend timed out"], [1, 3, none], [1, 4, none],
                                          [2, 3, "backend timed out"], [2, 4, "backend timed out"], [3, 4, none]]
    status = {(v["i"], v["j"]): v["status"] for v in s.extra["verdicts"]}
    assert status == {(0, 1): "ok", (0, 2): "timeout", (0, 3): "error", (0, 4): "error", (1, 2): "timeout",
                      (1, 3): "error", (1, 4): "error", (2, 3): "timeout", (2, 4): "timeout", (3, 4): "error"}
    assert s.statuses == [Status.OK, Status.OK] + [Status.INVALID] * 3
    # the rubric judge is asked for its scores after its own prefix
    point = ScriptedJudge(probs=lambda text, choices: [0.6, 0.3, 0.1])
    PointwiseScorer(judge=point, mode="logit", use_labels=True).score([group("p", [0, 1], labels=[True] * 2)])
    assert [tuple(r.choices) for r in point.requests] == [("1", "0.5", "0")] * 2
    assert all(r.assistant_prefix == POINTWISE_VERDICT_PREFIX for r in point.requests)


def test_generate_requests_carry_the_judge_options_and_the_drawn_presentation():
    judge = QualityJudge()
    g = group("g", [0, 1, 2, 3], labels=[True] * 4)
    s = ArenaScorer(judge=judge, max_tokens=77, temperature=0.3, seed=5, use_labels=True).score([g])[0]
    assert {(r.max_tokens, r.temperature, r.seed) for r in judge.requests} == {(77, 0.3, 5)}
    assert all(r.messages == [{"role": "user", "content": p}] for r, p in zip(judge.requests, judge.prompts, strict=True))
    # each prompt shows the problem, the reference and the pair in the order its verdict records
    for v, p in zip(s.extra["verdicts"], judge.prompts, strict=True):
        a, b = (v["i"], v["j"]) if v["i_first"] else (v["j"], v["i"])
        assert p == tournament_prompt("problem g", "7", g.responses[a], g.responses[b])


def test_order_agreement_compares_the_two_presentations():
    # a logit judge scripted per shown (q_A, q_B): how much it prefers A depends on the position
    table = {(1, 0): [0.9, 0.05, 0.05], (0, 1): [0.3, 0.6, 0.1],  # same winner, different margins
             (2, 3): [1.0, 0.0, 0.0], (3, 2): [0.0, 0.0, 1.0],  # a win one way, a tie the other
             (4, 4): [0.0, 0.0, 1.0],  # a tie both ways
             (5, 6): [1.0, 0.0, 0.0], (6, 5): [1.0, 0.0, 0.0]}  # always A: a flip

    def probs(text, choices):
        a, b = _pair(text)
        return table[_q(a), _q(b)]

    groups = [group("lo", [0, 1], labels=[True] * 2), group("hi", [1, 0], labels=[True] * 2),
              group("half", [2, 3], labels=[True] * 2), group("tie", [4, 4], labels=[True] * 2),
              group("flip", [5, 6], labels=[True] * 2)]
    scores = ArenaScorer(judge=ScriptedJudge(probs=probs), mode="logit", schedule="round-robin", both_orders=True,
                         use_labels=True).score(groups)
    agreement = {s.group_id: s.stats["order_agreement"] for s in scores}
    assert agreement == {"lo": 1.0, "hi": 1.0, "half": 0.0, "tie": 1.0, "flip": 0.0}
    assert all(s.stats["judge_calls"] == 2 and s.stats["pairs_judged"] == 1 for s in scores)
    # trace 0 of "lo": 0.35 when shown first, 1 - 0.925 when shown second; the pair's outcome is their mean
    np.testing.assert_allclose(scores[0].rewards, [0.2125, 0.7875])


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


def _costs(s):
    c = s.cost
    return c.judge_calls, c.prompt_tokens, c.completion_tokens, c.verifier_calls, c.cache_hits


def test_pointwise_prompts_rewards_stats_and_costs():
    judge = QualityJudge()  # 10 prompt + 5 completion tokens per request
    groups = [group("a", [3, 2, 0], labels=[True] * 3), group("b", [3, 1], labels=[True, False])]
    a, b = PointwiseScorer(judge=judge, use_labels=True).score(groups)
    # one prompt per response: its problem, its reference, the response, in the default RLAIF rubric
    assert len(judge.prompts) == 5
    asked = [(g.prompt, r) for g in groups for r in g.responses]
    for p, (problem, resp) in zip(judge.prompts, asked, strict=True):
        assert f"[PROBLEM]\n{problem}\n" in p and "The correct answer is: 7" in p and resp in p
        assert "Begin with \"Here is my evaluation of the response:\"" in p
    assert (a.group_id, b.group_id) == ("a", "b")
    np.testing.assert_array_equal(a.rewards, [1, 0.5, 0])
    np.testing.assert_array_equal(b.rewards, [1, 0])
    assert a.statuses == [Status.OK] * 3 and a.messages is None and b.messages is None  # no reason to give
    # each group pays for its own judge calls (labels: no verifier check)
    assert _costs(a) == (3, 30, 15, 0, 0) and _costs(b) == (2, 20, 10, 0, 0)
    # [1, 0.5, 0]: the middle reward equals the mean, so its advantage is 0
    assert a.stats == {"diverse": False, "all_correct": True, "all_incorrect": False, "nonzero_adv_before": 0,
                       "valid_before": 3, "routed": True, "judge_calls": 3, "nonzero_adv_after": 2,
                       "valid_after": 3}
    assert b.stats == {"diverse": True, "all_correct": False, "all_incorrect": False, "nonzero_adv_before": 2,
                       "valid_before": 2, "routed": True, "judge_calls": 2, "nonzero_adv_after": 2,
                       "valid_after": 2}


def test_adaptive_pointwise_abstains_without_reference_and_keeps_diverse_groups():
    judge = QualityJudge()
    none = group("none", [3, 2], reference=None)  # no reference, no labels: routing cannot be decided
    mix = group("mix", [3, 0, 3], labels=[True, False, True])
    ai = group("ai", [3, 2], labels=[False, False])
    s_none, s_mix, s_ai = AdaptivePointwiseScorer(judge=judge, use_labels=True).score([none, mix, ai])
    assert judge.generate_batches == [2]  # only the non-diverse group is judged, in the App. D prompt
    assert all("Score it as 1 (completely correct)" in p and "Here is my evaluation" not in p for p in judge.prompts)
    assert s_none.group_id == "none" and s_none.statuses == [Status.ABSTAIN] * 2
    assert np.isnan(s_none.rewards).all()
    assert s_none.messages == ["no reference answer or labels: cannot decide routing"] * 2
    assert s_none.stats == {"diverse": None, "all_correct": None, "all_incorrect": None, "nonzero_adv_before": None,
                            "valid_before": None, "routed": False, "judge_calls": 0, "nonzero_adv_after": 0,
                            "valid_after": 0}
    assert _costs(s_none) == (0, 0, 0, 0, 0)
    assert s_mix.group_id == "mix" and s_mix.statuses == [Status.OK] * 3 and s_mix.messages is None
    np.testing.assert_array_equal(s_mix.rewards, [1, 0, 1])
    assert s_mix.stats == {"diverse": True, "all_correct": False, "all_incorrect": False, "nonzero_adv_before": 3,
                           "valid_before": 3, "routed": False, "judge_calls": 0, "nonzero_adv_after": 3,
                           "valid_after": 3}
    assert _costs(s_mix) == (0, 0, 0, 0, 0)
    assert s_ai.group_id == "ai"
    np.testing.assert_array_equal(s_ai.rewards, [1, 0.5])
    assert s_ai.stats == {"diverse": False, "all_correct": False, "all_incorrect": True, "nonzero_adv_before": 0,
                          "valid_before": 2, "routed": True, "judge_calls": 2, "nonzero_adv_after": 2,
                          "valid_after": 2}
    assert _costs(s_ai) == (2, 20, 10, 0, 0)


def test_pointwise_options_are_checked():
    assert PointwiseScorer(judge=QualityJudge(), max_tokens=1, temperature=0.0).options.max_tokens == 1
    with pytest.raises(ValueError, match=re.escape("option 'max_tokens': must be >= 1, got 0")):
        PointwiseScorer(judge=QualityJudge(), max_tokens=0)
    with pytest.raises(ValueError, match=re.escape("option 'temperature': must be >= 0, got -0.5")):
        AdaptivePointwiseScorer(judge=QualityJudge(), temperature=-0.5)



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
    # a Bradley-Terry reward needs the prior too (the batched fit): refused before any judge call; the
    # win-rate reward fits nothing, so l2 = 0 is fine there
    for kw in ({"schedule": "live"}, {"schedule": "random"}, {"schedule": "round-robin", "reward": "bt"}):
        with pytest.raises(ValueError, match=r"option 'l2': must be > 0 for a Bradley-Terry reward .*got 0.0"):
            ArenaScorer(judge=QualityJudge(), l2=0.0, **kw)
    for kw in ({"schedule": "round-robin"}, {"schedule": "live", "reward": "winrate"}):
        assert ArenaScorer(judge=QualityJudge(), l2=0.0, **kw).options.l2 == 0.0
    assert TournamentScorer(judge=QualityJudge(), l2=0.0).options.l2 == 0.0  # round robin, win rate by default


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
