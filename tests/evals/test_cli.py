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
    r = _run("accuracy", ROLL, "--grade", "verifer", "--out", str(tmp_path))  # 'auto', the default, was not named
    assert r.exit_code == 2 and r.stderr == "error: unknown grading 'verifer'; use auto, labels or verifier\n"
    r = _run("accuracy", ROLL, "--limit", "0", "--out", str(tmp_path / "zero"))  # it reported on 1 problem
    assert r.exit_code == 2 and r.stderr == "error: --limit must be a positive integer, got 0\n", r.output
    assert not (tmp_path / "zero").exists()


def test_eval_reads_the_users_own_column_names_with_field(tmp_path):
    """Before: a file with its own column names got 'name yours with --field responses=COLUMN', and `--field` was
    'no such option' on every eval command."""
    rows = [json.loads(x) for x in open(ROLL)][:5]
    own = tmp_path / "own.jsonl"
    own.write_text("".join(json.dumps({"uid": r["id"], "instruction": r["problem"], "outputs": r["responses"],
                                       "target": r["answer"], "labels": r["correct"]}) + "\n" for r in rows))
    fields = ["--field", "prompt=instruction", "--field", "responses=outputs", "--field", "reference=target",
              "--field", "correct=labels", "--field", "id=uid"]
    r = _run("accuracy", str(own), *fields, "--out", str(tmp_path / "acc"))
    assert r.exit_code == 0, r.output
    pass8 = json.loads((tmp_path / "acc" / "accuracy.json").read_text())["table"][-1]["pass@k"]
    assert pass8 == sum(any(r["correct"]) for r in rows) / 5  # the labels of the renamed column
    for cmd in ("verifier", "select"):
        r = _run(cmd, str(own), "-s", "verifier", *fields, "--out", str(tmp_path / cmd))
        assert r.exit_code == 0, r.output
    rep = json.loads((tmp_path / "verifier" / "verifier.json").read_text())["reports"][0]["verifier"]
    assert rep["tp"] + rep["fp"] + rep["fn"] + rep["tn"] == 40 and rep["recall"]["value"] == 1.0


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


def test_accuracy_on_code_rollouts_grades_in_the_sandbox(tmp_path):
    """HumanEval rows (canonical solution = correct, `pass` = wrong) and the LiveCodeBench fixture, graded
    by the code verifier; maj@k does not apply to programs."""
    from pathlib import Path

    from rewardkit.evals.data import data_path

    rows = [json.loads(line) for line in open(data_path("humaneval", "test.jsonl"))][:2]
    roll = tmp_path / "he.jsonl"
    with roll.open("w") as f:
        for r in rows:
            f.write(json.dumps({"id": r["task_id"], "problem": r["prompt"], "kind": "code", "test": r["test"],
                                "entry_point": r["entry_point"],
                                "responses": [r["canonical_solution"], "    pass\n"]}) + "\n")
    r = _run("accuracy", str(roll), "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "accuracy.json").read_text())
    assert data["graded_by"] == "code verifier"
    # avg@1 reads the first sample only (the canonical one); pass@1 = c / n uses both
    assert data["table"][0] == {"k": 1, "pass@k": 0.5, "avg@k": 1.0, "maj@k": None}
    assert data["table"][1]["pass@k"] == 1.0

    lcb = [json.loads(line) for line in (Path(__file__).resolve().parents[1] / "fixtures" / "livecodebench_lite.jsonl").read_text().splitlines()]
    row = lcb[0] | {"id": lcb[0]["question_id"], "problem": lcb[0]["question_content"],
                    "responses": ["a, b = map(int, input().split())\nprint(a + b)", "print(3)"]}
    roll = tmp_path / "lcb.jsonl"
    roll.write_text(json.dumps(row) + "\n")
    r = _run("accuracy", str(roll), "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    # print(3) passes the public test only; the private tests (decoded from base64+zlib+pickle) fail it
    assert json.loads((tmp_path / "accuracy.json").read_text())["table"][0]["pass@k"] == 0.5


def test_headline_without_judges_on_all_groups(tmp_path):
    r = _run("headline", "-s", "verifier", "-s", "majority-vote", "--out", str(tmp_path), "--work", str(tmp_path / "w"))
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "headline.json").read_text())
    by = {x["scorer"]: x for x in data["reports"]}
    assert by["verifier"]["groups"] == 100 and not by["verifier"]["uses_judge"]
    # 100 - 86 all-correct - 4 all-wrong = 10 mixed groups; the verifier's 1 label slip adds a group
    assert 0.10 <= by["verifier"]["nonzero_advantage_groups"] <= 0.11
    assert by["verifier"]["best_of_8"] == pytest.approx(0.96)
    assert by["majority-vote"]["best_of_8"] == pytest.approx(0.93)  # = maj@8
    md = (tmp_path / "headline.md").read_text()
    assert "| `verifier` | 100 |" in md and "Command: `rewardkit eval headline -s verifier -s majority-vote`" in md


# ------------------------------------------------------- a partial headline run never replaces the committed table

@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A folder laid out as the checkout, with a committed headline table; commands run from it."""
    res = tmp_path / "benchmarks" / "results"
    res.mkdir(parents=True)
    for name in ("headline.json", "headline.md"):
        (res / name).write_text(f"committed {name}\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def committed(checkout):
    return [(checkout / "benchmarks" / "results" / n).read_text() for n in ("headline.json", "headline.md")]


def test_a_partial_headline_run_writes_under_runs_not_the_committed_results(checkout):
    before = committed(checkout)
    r = _run("headline", "-s", "verifier", "-s", "majority-vote")
    assert r.exit_code == 0, r.output
    assert committed(checkout) == before  # before: rewritten with a two-scorer table
    data = json.loads((checkout / "runs" / "headline" / "headline.json").read_text())
    assert [x["scorer"] for x in data["reports"]] == ["verifier", "majority-vote"]


@pytest.mark.parametrize("args, why", [
    (["-s", "verifier"], "only 1 of"),
    (["--judge", "http://127.0.0.1:9/v1"], "another judge"),
    (["--all-groups"], "--all-groups"),
    (["--generate-mode"], "--generate-mode"),
    (["--threads", "1"], "another judge"),
])
def test_update_results_refuses_a_partial_table(checkout, args, why):
    before = committed(checkout)
    r = _run("headline", "--update-results", *args)
    lines = r.output.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: --update-results"), r.output
    assert why in lines[0] and "runs/headline" in lines[0], lines[0]
    assert committed(checkout) == before and not (checkout / "runs").exists()  # refused before any scoring


def test_an_option_no_scorer_has_is_refused_before_any_scoring(tmp_path):
    """Before: `-o timout=3` (a typo) was dropped without a word, since each scorer gets the options it has; now an
    option none of the -s scorers has is one error line listing theirs. One some scorer has is still given to it."""
    for cmd in ("verifier", "select"):
        r = _run(cmd, ROLL, "-s", "verifier", "-s", "majority-vote", "-o", "timout=3", "--limit", "2",
                 "--out", str(tmp_path / cmd))
        assert r.exit_code == 2 and r.stderr == (
            "error: no scorer given (verifier, majority-vote) has option(s) ['timout']; options: verifier: checker, "
            "timeout, workers; majority-vote: answer_timeout\n"), r.output
        assert not (tmp_path / cmd).exists()
    r = _run("verifier", ROLL, "-s", "verifier", "-s", "majority-vote", "-o", "answer_timeout=3", "--limit", "2",
             "--out", str(tmp_path / "ok"), "--n-boot", "10")
    assert r.exit_code == 0, r.output
    manifest = json.loads((tmp_path / "ok" / "majority-vote.scores.jsonl.manifest.json").read_text())
    assert manifest["options"]["answer_timeout"] == 3.0


@pytest.mark.parametrize("flag", ["--limit", "--max-gen-toks"])
def test_lm_eval_refuses_a_count_below_one_before_lm_eval_runs(tmp_path, flag):
    """Before: `--max-gen-toks 0` ran with the task's 1024-token budget (0 read as unset), and `--limit 0` went to
    lm-eval, which reads a limit below 1 as a fraction of the task."""
    r = _run("lm-eval", str(tmp_path / "model"), "--tasks", "no_such_task", flag, "0", "--out", str(tmp_path))
    assert r.exit_code == 2 and r.stderr.startswith(f"error: invalid value for '{flag}': Input should be greater "
                                                    "than or equal to 1"), r.output


def test_verifier_refuses_a_negative_bootstrap_count(tmp_path):
    """Before: `--n-boot -5` scored, then ended in numpy's 'negative dimensions are not allowed'."""
    r = _run("verifier", ROLL, "-s", "verifier", "--limit", "2", "--n-boot", "-5", "--out", str(tmp_path))
    assert r.exit_code == 2 and r.stderr.startswith("error: invalid value for '--n-boot': Input should be greater "
                                                    "than or equal to 0"), r.output
    assert not (tmp_path / "verifier.scores.jsonl").exists()


@pytest.mark.parametrize("flag", ["--n", "--batch-size", "--max-tokens"])
def test_generate_refuses_a_count_below_one_before_the_model(tmp_path, flag):
    """Before: these were checked (if at all) once the model had loaded: `--batch-size 0` ended in 'range() arg 3
    must not be zero', naming no option."""
    import socket

    with socket.socket() as s:  # a model server that is not there: the count must be refused before it is asked
        s.bind(("127.0.0.1", 0))
        r = _run("generate", f"http://127.0.0.1:{s.getsockname()[1]}/v1", "gsm8k", "--limit", "2", flag, "0",
                 "--out", str(tmp_path / "r.jsonl"))
    assert r.exit_code == 2 and r.stderr.startswith(f"error: invalid value for '{flag}': Input should be greater "
                                                    "than or equal to 1"), r.output
    assert not (tmp_path / "r.jsonl").exists()


def test_judge_reads_its_rollouts_before_the_judge_loads(tmp_path):
    """Before: the judge (a model load for a local one) came first, and a missing --rollouts file only after it."""
    import socket

    with socket.socket() as s:  # a judge that is not there: the file must be named first
        s.bind(("127.0.0.1", 0))
        r = _run("judge", "--judge", f"http://127.0.0.1:{s.getsockname()[1]}/v1", "--rollouts",
                 str(tmp_path / "missing.jsonl"), "--out", str(tmp_path))
    assert r.exit_code == 2 and r.stderr == f"error: {tmp_path / 'missing.jsonl'}: no such file or directory\n", r.output


@pytest.mark.parametrize("flag", ["--pairs", "--pb-pairs", "--injection-pairs"])
def test_judge_refuses_a_negative_pair_count_before_the_judge(tmp_path, flag):
    """Before: `--pb-pairs -1` took all pairs but the last ([:-1]) and ran the judge on them."""
    import socket

    with socket.socket() as s:  # a judge that is not there: the count must be refused before it is asked
        s.bind(("127.0.0.1", 0))
        r = _run("judge", "--judge", f"http://127.0.0.1:{s.getsockname()[1]}/v1", flag, "-1", "--out", str(tmp_path))
    assert r.exit_code == 2 and r.stderr.startswith(f"error: invalid value for '{flag}': Input should be greater than or equal to 0")


def test_leftover_scores_of_another_job_stop_headline_until_restart(checkout):
    work = checkout / "w"
    # another job's scores in the work folder: 5 groups with another verifier timeout
    assert _run("verifier", ROLL, "-s", "verifier", "-o", "timeout=3", "--limit", "5", "--out", str(work)).exit_code == 0
    r = _run("headline", "-s", "verifier", "--work", str(work))
    assert r.exit_code == 2 and "was written by another job" in r.output and "--restart" in r.output, r.output
    assert not (work / "headline.json").exists()  # before: exit 0, the row left out as "Not run"
    r = _run("headline", "-s", "verifier", "--work", str(work), "--restart")
    assert r.exit_code == 0, r.output
    data = json.loads((work / "headline.json").read_text())
    assert data["reports"][0]["groups"] == 100 and not data["skipped"]


def test_select_plot_draws_the_numbers_select_md_states_and_no_selector_above_the_oracle(tmp_path):
    r = _run("select", ROLL, "-s", "verifier", "-s", "majority-vote", "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    sel = json.loads((tmp_path / "select.json").read_text())
    curves, md = sel["curves"], (tmp_path / "select.md").read_text()
    assert curves["n"] == list(range(1, 9))
    oracle, random = curves["oracle (pass@n)"], curves["random choice"]
    for name in ("verifier", "majority-vote"):  # before: the verifier drawn above the oracle at n = 2, 3, 5-7
        assert all(s <= o + 1e-12 for s, o in zip(curves[name], oracle)), (name, curves[name], oracle)
        assert f"| {name} | 100 | {100 * curves[name][-1]:.1f} |" in md  # the curve ends at the table's best-of-8
    # the random line is where select.md puts it (before: drawn at the first sample's 90%, written 91.0%)
    assert set(random) == {sel["baselines"]["random"]}
    assert f"random choice (mean accuracy) {100 * random[0]:.1f}%" in md and "91.0%" in md
    assert f"oracle (pass@8) {100 * oracle[-1]:.1f}%" in md and "96.0%" in md
