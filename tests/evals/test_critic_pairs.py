"""RARO critic data: expert vs policy pairs from the shared data, split by problem, and the held-out metrics."""

from __future__ import annotations

import math

import pytest
from rewardkit.evals.critic_pairs import CriticPair, critic_report, expert_solutions, policy_pairs, read_jsonl
from rewardkit.evals.data import data_path
from rewardkit.evals.splits import problem_key, problems_of, split_by_problem

from rewardkit.raro.critic import CriticScorer
from rewardkit.testing import ScriptedJudge

ROLLOUTS = data_path("math_rollouts_qwen25", "math_cot_100.jsonl")
MATH500 = data_path("math500", "test.jsonl")
needs_data = pytest.mark.skipif(not (ROLLOUTS.exists() and MATH500.exists()), reason="shared data not found")


@needs_data
def test_pairs_from_the_shared_rollouts():
    rows = read_jsonl(ROLLOUTS)
    experts = expert_solutions(read_jsonl(MATH500), rows)
    assert len(experts) == 595  # 500 + 100 problems, 5 in both
    pairs = policy_pairs(rows, experts, "qwen2.5-math", per_problem=2)
    assert len(pairs) == 200
    by = {}
    for p in pairs:
        by.setdefault(p.id.split("/")[0], []).append(p)
    # a problem with wrong answers gives its wrong ones first: math_cot_100-017 has 4 of 8 wrong
    assert [p.policy_correct for p in by["math_cot_100-017"]] == [False, False]
    row = next(r for r in rows if r["id"] == "math_cot_100-017")
    for p in by["math_cot_100-017"]:
        i = int(p.id.rsplit("/", 1)[1])
        assert p.policy == row["responses"][i] and row["correct"][i] is False
        assert p.expert == row["solution"]  # MATH-500 lacks this problem: the rollouts' own solution
    # the 4 all-wrong groups and the 86 all-right ones give what they have
    assert sum(p.policy_correct is False for p in pairs) == sum(min(2, r["correct"].count(False)) for r in rows)


@needs_data
def test_expert_is_matched_by_problem_text_across_files():
    m500 = read_jsonl(MATH500)
    rows = read_jsonl(ROLLOUTS)
    experts = expert_solutions(m500, rows)
    shared = [r for r in rows if problem_key(r["problem"]) in {problem_key(m["problem"]) for m in m500}]
    assert len(shared) == 5
    for r in shared:
        m = next(m for m in m500 if problem_key(m["problem"]) == problem_key(r["problem"]))
        assert experts[problem_key(r["problem"])] == m["solution"]  # first source wins


@needs_data
def test_split_keeps_every_pair_of_a_problem_together():
    rows = read_jsonl(ROLLOUTS)
    pairs = policy_pairs(rows, expert_solutions(rows), "qwen2.5-math")
    mixed = [r["problem"] for r in rows if 0 < sum(r["correct"]) < 8]
    parts = split_by_problem(pairs, lambda p: p.problem, pinned=mixed)
    probs = {k: problems_of(v, lambda p: p.problem) for k, v in parts.items()}
    assert not (probs["train"] | probs["val"]) & probs["test"]
    assert {problem_key(m) for m in mixed} <= probs["test"]


def test_pair_is_scored_as_a_one_response_group():
    p = CriticPair("q/src/0", "What is 1+1?", "It is \\boxed{2}.", "\\boxed{3}", "src", False)
    g = p.group()
    assert (g.id, g.prompt, g.responses, g.expert, g.labels) == ("q/src/0", "What is 1+1?", ["\\boxed{3}"],
                                                                 "It is \\boxed{2}.", [False])
    # a critic that always says "Answer 1" names the expert exactly when it sat first
    judge = ScriptedJudge(reply="Both checked.\nAnswer 1")
    s = CriticScorer(judge=judge, mode="generate").score([g])[0]
    pos = s.components["expert_position"][0]
    assert s.components["critic_label"] == ["expert" if pos == 1 else "policy"]


def _pairs(n, source="a", correct=None):
    return [CriticPair(f"p{i}", "q", "e", "x", source, correct) for i in range(n)]


def test_critic_report_by_hand():
    pairs = _pairs(4, "a", False) + _pairs(2, "b", True)
    labels = ["expert", "tie", None, "policy", "expert", "expert"]
    positions = [1, 2, 1, 1, 2, 2]
    r = critic_report(pairs, labels, positions)
    assert (r["n"], r["accuracy"], r["tie_rate"], r["policy_rate"]) == (6, 3 / 6, 1 / 6, 1 / 6)
    assert r["invalid_rate"] == pytest.approx(1 / 6)
    assert r["per_source"]["a"]["accuracy"] == 0.25 and r["per_source"]["b"]["accuracy"] == 1.0
    assert r["policy_wrong"]["n"] == 4 and r["policy_wrong"]["tie_rate"] == 0.25
    assert r["policy_right"]["n"] == 2 and r["policy_right"]["tie_rate"] == 0.0
    # Answer 1/2 picks: expert@1 (slot 1), policy with expert@1 (slot 2), expert@2 twice (slot 2): 1 of 4
    assert r["first_slot_rate"] == 0.25
    assert r["expert_first_share"] == 0.5


def test_critic_report_refuses_mismatched_inputs():
    with pytest.raises(ValueError, match="3 critic labels for 2 pairs"):
        critic_report(_pairs(2), ["tie"] * 3)
    with pytest.raises(ValueError, match="must be expert, policy, tie or None"):
        critic_report(_pairs(1), ["Answer 1"])
    assert math.isnan(critic_report([], [])["accuracy"])


def test_warm_start_rows_carry_the_verdict_the_parser_reads():
    from rewardkit.evals.critic_pairs import verdict_target, warm_start_rows

    from rewardkit.raro.critic import expert_positions
    from rewardkit.verdicts import parse_answer_choice

    wrong = CriticPair("q1/src/0", "What is 1+1?", "So it is \\boxed{2}.", "I think \\boxed{3}", "src", False)
    right = CriticPair("q1/src/1", "What is 1+1?", "So it is \\boxed{2}.", "Surely \\boxed{2}", "src", True)
    unknown = CriticPair("q1/src/2", "What is 1+1?", "So it is \\boxed{2}.", "maybe 2", "src", None)
    rows = warm_start_rows([wrong, right, unknown])
    assert len(rows) == 2  # the unlabelled pair is skipped
    (pos,) = expert_positions(1, 0, "q1/src/0")
    (msgs, target), (_, tie) = rows
    assert parse_answer_choice(target).label == str(pos) and parse_answer_choice(tie).label == "tie"
    first, second = ("2", "3") if pos == 1 else ("3", "2")  # the final view: boxed contents only
    assert target == f"Answer 1 gives {first}. Answer 2 gives {second}. The two answers differ.\nAnswer {pos}"
    assert f"<answer_{pos}>\n2\n</answer_{pos}>" in msgs[0]["content"]  # the expert's final answer in its slot
    assert verdict_target("a " * 20, "b", "tie").startswith("Answer 1 gives " + "a " * 11 + "a ...")
    with pytest.raises(ValueError, match="verdict must be"):
        verdict_target("1", "2", "Answer 3")


def test_evaluate_critic_end_to_end_with_a_scripted_judge():
    from rewardkit.evals.critic_pairs import evaluate_critic

    pairs = [CriticPair(f"q{i}/src/0", f"What is {i} + 1?", f"It is \\boxed{{{i + 1}}}.", f"\\boxed{{{i + 2}}}", "src", False)
             for i in range(8)]

    def finds_expert(prompt: str) -> str:  # reads which slot holds the right final answer
        i = int(prompt.split("What is ")[1].split(" ")[0])
        first = prompt.split("<answer_1>")[1].split("</answer_1>")[0].strip()
        return "Checked both.\nAnswer 1" if first == str(i + 1) else "Checked both.\nAnswer 2"

    rep, rows = evaluate_critic(ScriptedJudge(reply=finds_expert), pairs, mode="generate", view="final")
    assert rep["accuracy"] == 1.0 and rep["tie_rate"] == 0.0 and rep["n"] == 8
    assert {r["label"] for r in rows} == {"expert"} and all(r["output"].startswith("Checked both.") for r in rows)
    assert 0 < rep["expert_first_share"] < 1  # the expert's slot is seeded per pair, not fixed
    rep, _ = evaluate_critic(ScriptedJudge(reply="Both look fine.\ntie"), pairs, mode="generate", view="final")
    assert (rep["accuracy"], rep["tie_rate"]) == (0.0, 1.0)
    rep, _ = evaluate_critic(ScriptedJudge(reply="no verdict at all"), pairs, mode="generate", view="final")
    assert rep["invalid_rate"] == 1.0 and rep["accuracy"] == 0.0
