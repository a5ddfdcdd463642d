"""rewardkit.score, the Python API's front door: rows in (flat or grouped dicts, a DataFrame, a Dataset), the same
rows out with rewards and statuses."""

from __future__ import annotations

import pytest

import rewardkit
from rewardkit.testing import ScriptedJudge

FLAT = [{"prompt": "2+2?", "response": r"\boxed{4}", "answer": "4"},
        {"prompt": "3+3?", "response": r"\boxed{6}", "answer": "6"},
        {"prompt": "2+2?", "response": r"\boxed{5}", "answer": "4"}]


def test_flat_rows_come_back_in_order_with_a_reward_and_status_each():
    out = rewardkit.score(FLAT)
    assert [(r["prompt"], r["reward"], r["status"]) for r in out] == [("2+2?", 1.0, "ok"), ("3+3?", 1.0, "ok"),
                                                                      ("2+2?", 0.0, "ok")]
    assert out[0]["answer"] == "4" and "reward" not in FLAT[0]  # the input rows are left as they were


def test_grouped_rows_and_a_row_without_reference():
    rows = [{"problem": "2+2?", "responses": [r"\boxed{4}", r"\boxed{5}"], "label": 4},
            {"problem": "1+1?", "responses": [r"\boxed{2}"]}]
    a, b = rewardkit.score(rows, "verifier")
    assert (a["rewards"], a["statuses"]) == ([1.0, 0.0], ["ok", "ok"])
    assert (b["rewards"], b["statuses"]) == ([None], ["abstain"]) and "no reference" in b["messages"][0]


def test_a_group_relative_scorer_groups_flat_rows_by_prompt():
    rows = [{"prompt": "q", "response": rf"\boxed{{{a}}}"} for a in (4, 5, 4, 7)]
    assert [r["reward"] for r in rewardkit.score(rows, "majority-vote")] == [1.0, 0.0, 1.0, 0.0]


def test_a_judge_scorer_with_options_and_several_references_shown_to_the_judge():
    seen: list[str] = []

    def reply(prompt: str) -> str:
        seen.append(prompt)
        verdict = 1 if prompt.rstrip().split("[RESPONSE]\n")[-1].startswith("four") else 0
        return f"Based on my evaluation, the final overall score should be: \\boxed{{{verdict}}}"

    rows = [{"problem": "2+2?", "responses": ["four, as 2+2=4", "five"], "answer": ["4", "four"]}]
    (out,) = rewardkit.score(rows, "pointwise", judge=ScriptedJudge(reply=reply), mode="generate")
    assert out["rewards"] == [1.0, 0.0]
    assert all("any one of these (each is correct): 4 | four" in p for p in seen) and len(seen) == 2


def test_tables_and_field_mapping():
    pd = pytest.importorskip("pandas")
    datasets = pytest.importorskip("datasets")
    df = pd.DataFrame([{"q": "2+2?", "gen": r"\boxed{4}", "gold": 4.0}, {"q": "2+2?", "gen": r"\boxed{5}", "gold": 4.0},
                       {"q": "1+1?", "gen": r"\boxed{2}", "gold": None}])  # a missing gold is NaN in pandas
    out = rewardkit.score(df, fields={"prompt": "q", "response": "gen", "reference": "gold"})
    assert isinstance(out, pd.DataFrame) and out["reward"].tolist()[:2] == [1.0, 0.0]
    assert out["status"].tolist() == ["ok", "ok", "abstain"]
    ds = datasets.Dataset.from_list(FLAT)
    got = rewardkit.score(ds)
    assert isinstance(got, datasets.Dataset) and got["reward"] == [1.0, 1.0, 0.0]


def test_bad_rows_are_a_clear_error_naming_row_and_field():
    with pytest.raises(ValueError, match=r"row 1: field 'answer': expected a string or a number .*got boolean"):
        rewardkit.score([FLAT[0], dict(FLAT[1], answer=True)])
    with pytest.raises(ValueError, match=r"row 0: field 'prompt': missing \(looked for prompt, problem"):
        rewardkit.score([{"response": "x"}])
    with pytest.raises(TypeError, match="got one dict: pass \\[row\\]"):
        rewardkit.score(FLAT[0])
    with pytest.raises(ValueError, match="unknown field 'answer'"):
        rewardkit.score(FLAT, fields={"answer": "x"})


def test_duplicate_group_ids_are_refused_naming_both_rows():
    rows = [{"id": "a", "problem": "p", "responses": ["x"]}, {"id": "b", "problem": "q", "responses": ["y"]},
            {"id": "a", "problem": "r", "responses": ["z"]}]
    with pytest.raises(ValueError, match=r"row 2: field 'id': duplicate group id 'a' \(first at row 0\)"):
        rewardkit.score(rows, "majority-vote")
