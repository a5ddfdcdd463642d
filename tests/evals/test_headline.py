"""The headline table's group selection and per-scorer options (real shared rollouts)."""

import json
from pathlib import Path

from rewardkit.evals.data import rollouts_path
from rewardkit.evals.headline import JUDGE_GROUPS, headline, headline_markdown, headline_table, mixed_groups

from rewardkit.testing import ScriptedJudge


def test_mixed_groups_are_the_ten_with_both_labels():
    ids = mixed_groups(rollouts_path())
    # data README: 86 problems all correct, 4 all wrong, so 10 mixed
    assert len(ids) == 10 and set(JUDGE_GROUPS) <= set(ids)
    rows = {r["id"]: r for r in map(json.loads, rollouts_path().open())}
    assert all(0 < sum(rows[i]["correct"]) < 8 for i in ids)


def test_per_scorer_options_reach_the_scorer(tmp_path):
    data = headline(rollouts_path(), tmp_path, scorers=["verifier"], options={"verifier": {"timeout": 7.5}},
                    n_boot=10)
    (rep,) = data["reports"]
    assert rep["options"] == {"timeout": "7.5"}
    manifest = json.loads(next(tmp_path.glob("verifier.scores.jsonl.manifest.json")).read_text())
    assert "7.5" in json.dumps(manifest)


def test_note_names_other_groups_as_mixed():
    data = {"judge": "smollm2", "judge_groups": ["math_cot_100-001", "math_cot_100-002", "math_cot_100-003"],
            "reports": [], "skipped": {}}
    md = headline_markdown(data, "rewardkit eval headline --mixed-groups")
    assert "3 groups (" in md and "4 of 8 correct each" not in md and "scores 50%" not in md
    md = headline_markdown({**data, "judge_groups": list(JUDGE_GROUPS)}, "rewardkit eval headline")
    assert "2 mixed groups (" in md and "4 of 8 correct each" in md


def test_judge_rows_name_the_verdict_mode_they_ran_in(tmp_path):
    """Issue 29: logit mode reads the JURY-RL judge's True/False from its probabilities, with none of the reasoning
    its App. D prompt asks for, so every judge row names its mode; "auto" is resolved for the judge it ran."""
    judge = ScriptedJudge(reply=lambda p: "The answer checks out.\nFinal judgment: True", probs=lambda p, c: [0.7, 0.3])
    for logit, options, mode in ((True, None, "logit"), (False, None, "generate"),
                                 (True, {"llm-judge-rollout": {"mode": "auto"}}, judge.default_mode)):
        data = headline(rollouts_path(), tmp_path / f"{mode}{options is None}", scorers=["llm-judge-rollout"],
                        judge=judge, logit=logit, options=options, n_boot=10)
        (rep,) = data["reports"]
        assert rep["options"]["mode"] == mode and rep["statuses"] == {"ok": 16}
        assert f"| `llm-judge-rollout` (judge, {mode}) |" in headline_table(data)
    # the committed results, "logits" (logit mode's older spelling) included
    recorded = json.loads((Path(__file__).parents[2] / "benchmarks" / "results" / "headline.json").read_text())
    table = headline_table(recorded)
    assert "| `critic` (judge, logit) |" in table and "| `llm-judge` (judge, logit) |" in table
    assert "| `verifier` |" in table
    # a judge row without a mode is a scorer that reads no verdict (the model's own token probabilities)
    no_mode = {line.split("`")[1] for line in table.splitlines() if "(judge)" in line}
    assert no_mode <= {"self-certainty", "entropy"}, no_mode
