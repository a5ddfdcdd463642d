"""`rewardkit eval tables`: the committed README tables and reports agree with the results JSON (the CI
check), and the check catches each kind of staleness in a copy of the repository."""

import json
import os
import shutil
from pathlib import Path

import pytest
from rewardkit.cli.app import app
from rewardkit.evals.tables import ROOT, check, command_argv, load_runs, regenerate, rewrite_readme, unlisted
from typer.testing import CliRunner


def test_committed_readme_and_results_are_up_to_date():
    r = CliRunner().invoke(app, ["eval", "tables", "--check"])
    assert r.exit_code == 0, r.output
    assert "up to date" in r.output


@pytest.fixture
def repo(tmp_path):
    """A copy of the README, run configs and results, with the code linked in (regeneration runs there)."""
    root = tmp_path / "repo"
    (root / "benchmarks").mkdir(parents=True)
    shutil.copy(ROOT / "README.md", root / "README.md")
    shutil.copy(ROOT / "benchmarks" / "runs.json", root / "benchmarks" / "runs.json")
    shutil.copytree(ROOT / "benchmarks" / "results", root / "benchmarks" / "results")
    for name in ("rewardkit", "cli", "evals", "conftest.py"):
        os.symlink(ROOT / name, root / name)
    return root


def test_check_catches_each_kind_of_staleness(repo):
    assert check(repo) == []
    res = repo / "benchmarks" / "results"
    acc = json.loads((res / "accuracy.json").read_text())
    acc["table"][0]["pass@k"] = 0.5
    (res / "accuracy.json").write_text(json.dumps(acc))
    problems = check(repo)
    assert any("accuracy.md: differs from accuracy.json" in p for p in problems)
    assert any("README.md: table 'accuracy' differs" in p for p in problems)
    (res / "headline.md").unlink()
    (res / "orphan.md").write_text("x")
    problems = check(repo)
    assert any("headline.md: missing" in p for p in problems)
    assert "orphan.md" in unlisted(repo) and not any("orphan.md" in p for p in problems)


def test_rewrite_readme_renders_from_json(repo):
    readme = (repo / "README.md").read_text()
    stale = readme.replace("| 8 | 96.0 | 91.0 | 93.0 |", "| 8 | 99.0 | 91.0 | 93.0 |")
    assert stale != readme
    fixed, changed = rewrite_readme(stale, repo)
    assert fixed == readme and changed == ["accuracy"]
    (repo / "README.md").write_text(stale)
    assert regenerate(repo, run=False) == [] and (repo / "README.md").read_text() == readme


def test_regenerate_runs_a_producer_and_fixes_the_readme(repo):
    readme = repo / "README.md"
    readme.write_text(readme.read_text().replace("| 8 | 96.0 | 91.0 | 93.0 |", "| 8 | 1.0 | 1.0 | 1.0 |"))
    (repo / "benchmarks" / "results" / "accuracy.json").unlink()
    done = regenerate(repo, only=["accuracy"])
    assert [d["name"] for d in done] == ["accuracy"] and done[0]["returncode"] == 0, done
    assert check(repo) == []
    with pytest.raises(KeyError, match="unknown run 'nope'"):
        regenerate(repo, only=["nope"])


def test_run_configs_cover_the_results_and_commands_resolve():
    runs = load_runs()
    assert len({r.name for r in runs}) == len(runs)
    assert all(r.slow for r in runs if r.judge)  # every judge-heavy producer is marked slow
    argv = command_argv("rewardkit eval accuracy {shared}/data/x.jsonl")
    assert argv[1] == "-c" and "{shared}" not in argv[-1] and Path(argv[-1]).name == "x.jsonl"


def test_judge_training_table_renders_before_and_after():
    from rewardkit.evals.tables import TABLES

    rates = {"accuracy": 0.25, "tie_rate": 0.5}
    d = {"gar_discriminator": {"heldout_solutions": 80, "before": {"n": 250, "auroc": 0.5, "balanced_accuracy": 0.5, "f1": 0.0},
                               "after": {"n": 250, "auroc": 0.625, "balanced_accuracy": 0.6, "f1": float("nan")}},
         "raro_critic": {"before": {"n": 100, **rates, "logit": rates}, "after": {"n": 100, **rates, "logit": {**rates, "accuracy": 0.75}}}}
    md = TABLES["judge_training"][1](d)
    assert "| GAR discriminator (stage-1 SFT) | 80 ProcessBench solutions, 250 labelled slices | slice AUROC of P(YES) | 0.500 | 0.625 |" in md
    assert "| ProcessBench F1 | 0.000 | - |" in md
    assert "| RARO critic (warm start + RL) | 100 expert/policy pairs | names the expert (logit) | 0.250 | 0.750 |" in md
    assert TABLES["judge_training"][1]({"gar_discriminator": {"before": {}}}).count("\n") == 2  # no "after" yet: header only


def test_judge_training_table_pairs_headline_rows_by_scorer_and_mode():
    from rewardkit.evals.tables import TABLES

    def rep(scorer, mode, judge, auc, uses_judge=True):
        return {"scorer": scorer, "mode": mode, "judge": judge, "auc": auc, "best_of_8": 0.5, "uses_judge": uses_judge}

    d = {"headline": {"groups": ["a", "b"], "reports": [
        rep("verifier", None, "untrained", 1.0, uses_judge=False),
        rep("critic", "logit", "untrained", 0.25), rep("critic", "logit", "runs/judges/raro_critic", 0.75),
        rep("critic", "generate", "untrained", 0.5),  # no trained row beside it: left out
        rep("slices", "logit", "runs/judges/gar", 0.625), rep("slices", "logit", "untrained", 0.375)]}}
    md = TABLES["judge_training"][1](d)
    assert "| headline `critic` (logit) | 2 mixed rollout groups | AUC | 0.250 | 0.750 |" in md
    assert "| headline `slices` (logit) | 2 mixed rollout groups | AUC | 0.375 | 0.625 |" in md
    assert "generate" not in md and "verifier" not in md


def test_results_without_a_producer_are_one_warning_line_and_records_none(repo, monkeypatch):
    import rewardkit.evals.tables as tables

    res = repo / "benchmarks" / "results"
    for name in ("orphan_a.md", "orphan_a.json", "orphan_b.md", "kept.md", "kept.json"):
        (res / name).write_text("x")
    cfg = json.loads((repo / "benchmarks" / "runs.json").read_text())
    cfg["records"] = {**cfg.get("records", {}), "kept": "a run on another machine"}
    (repo / "benchmarks" / "runs.json").write_text(json.dumps(cfg))
    assert unlisted(repo) == ["orphan_a.json", "orphan_a.md", "orphan_b.md"]  # a record is not an orphan
    monkeypatch.setattr(tables, "ROOT", repo)
    monkeypatch.setattr(tables.unlisted, "__defaults__", (repo,))
    monkeypatch.setattr(tables.check, "__defaults__", (repo,))
    r = CliRunner().invoke(app, ["eval", "tables", "--check"])
    warnings = [ln for ln in r.output.splitlines() if ln.startswith("warning:")]
    # before: one line per file, 10 of them on every run of the committed repository
    assert warnings == ["warning: 3 file(s) in benchmarks/results have no producer or record in benchmarks/runs.json "
                        "(not regenerated): orphan_a.json, orphan_a.md, orphan_b.md"], r.output
    assert r.exit_code == 0, r.output
