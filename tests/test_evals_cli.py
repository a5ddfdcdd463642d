"""`rewardkit eval` commands on the real shared rollouts (CliRunner, real files)."""

import json

import pytest
from rewardkit.cli.app import app
from rewardkit.evals.data import rollouts_path
from typer.testing import CliRunner

runner = CliRunner()
ROLL = str(rollouts_path())


def _run(*args):
    return runner.invoke(app, ["eval", *args])


def test_accuracy_on_shared_rollouts(tmp_path):
    r = _run("accuracy", ROLL, "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "accuracy.json").read_text())
    tab = {row["k"]: row for row in data["table"]}
    assert list(tab) == [1, 2, 4, 8] and data["graded_by"] == "labels"
    # data README: 728/800 correct, 96 problems with at least one correct sample
    assert tab[1]["pass@k"] == pytest.approx(0.91) and tab[8]["pass@k"] == pytest.approx(0.96)
    # maj@8 = 93%: the same number rewardkit tts's independent majority baseline reports (tts_rollouts.md)
    assert tab[8]["maj@k"] == pytest.approx(0.93)
    assert "| 8 | 96.0 | 91.0 | 93.0 |" in (tmp_path / "accuracy.md").read_text()


def test_accuracy_graded_by_verifier_and_errors(tmp_path):
    r = _run("accuracy", ROLL, "--grade", "verifier", "--limit", "10", "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "accuracy.json").read_text())["graded_by"] == "verifier"
    r = _run("accuracy", ROLL, "--k", "16", "--limit", "3", "--out", str(tmp_path))
    assert r.exit_code == 2 and "k=16 is larger than n=8" in r.output
    nolab = tmp_path / "nolabels.jsonl"
    nolab.write_text(json.dumps({"id": "a", "problem": "1+1?", "responses": ["\\boxed{2}", "3"]}) + "\n")
    r = _run("accuracy", str(nolab), "--grade", "labels", "--out", str(tmp_path))
    assert r.exit_code == 2 and "needs correctness labels" in r.output and "'a'" in r.output
    r = _run("accuracy", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path))
    assert r.exit_code == 2 and "no such file" in r.output


def test_verifier_and_select_commands(tmp_path):
    r = _run("verifier", ROLL, "-s", "verifier", "--limit", "20", "--out", str(tmp_path), "--n-boot", "200")
    assert r.exit_code == 0, r.output
    rep = json.loads((tmp_path / "verifier.json").read_text())["reports"][0]
    v = rep["verifier"]
    # the verifier agrees with the upstream labels (one known label slip in the whole file)
    assert v["tp"] + v["tn"] >= 20 * 8 - 1 and v["recall"]["value"] == 1.0
    # resumable: a second run reuses the scores file (no new rows)
    before = (tmp_path / "verifier.scores.jsonl").read_text()
    assert _run("verifier", ROLL, "-s", "verifier", "--limit", "20", "--out", str(tmp_path)).exit_code == 0
    assert (tmp_path / "verifier.scores.jsonl").read_text() == before

    r = _run("select", ROLL, "-s", "verifier", "-s", "majority-vote", "--limit", "20", "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    sel = json.loads((tmp_path / "select.json").read_text())
    assert (tmp_path / "select.png").stat().st_size > 1000
    by = {x["scorer"]: x for x in sel["reports"]}
    assert by["verifier"]["best_of_8"] == pytest.approx(sel["baselines"]["oracle"])
    assert by["majority-vote"]["best_of_8"] <= by["verifier"]["best_of_8"]
    r = _run("select", ROLL, "-s", "no-such-scorer", "--limit", "2", "--out", str(tmp_path))
    assert r.exit_code == 2 and "unknown scorer 'no-such-scorer'" in r.output
