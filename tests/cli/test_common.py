"""The shared local-judge options (--device, --dtype, --batch-tokens, --threads) of every judge command."""

from __future__ import annotations

import json

import pytest
import typer
from rewardkit.cli.app import app
from rewardkit.cli.common import judge_spec
from typer.testing import CliRunner

from rewardkit.backends import parse_spec
from rewardkit.scoring import scorer_options


def test_options_become_spec_query_the_backend_grammar_reads():
    spec = judge_spec("smollm2", "cpu", "bfloat16", 8192, 1)
    assert spec == "smollm2?device=cpu&dtype=bfloat16&batch_tokens=8192&num_threads=1"
    assert parse_spec(spec) == ("transformers", {"model": "smollm2", "device": "cpu", "dtype": "bfloat16",
                                                 "batch_tokens": 8192, "num_threads": 1})
    assert judge_spec("hf:/models/j?share_prefix=false", dtype="float16") == "hf:/models/j?share_prefix=false&dtype=float16"
    assert judge_spec(None, batch_tokens=1024) == "smollm2?batch_tokens=1024"  # the default local judge
    assert judge_spec(None) is None and judge_spec("http://h:1/v1") == "http://h:1/v1"  # nothing set: unchanged


@pytest.mark.parametrize("spec, kw, message", [
    ("http://127.0.0.1:8000/v1", {"dtype": "bfloat16"}, "apply to a local transformers judge"),
    ("smollm2?dtype=float32", {"dtype": "bfloat16"}, "already sets dtype"),
    ("smollm2", {"dtype": "fp8"}, "must be one of auto, float32, bfloat16, float16"),
])
def test_options_that_cannot_apply_are_clear_errors(spec, kw, message):
    with pytest.raises(typer.BadParameter, match=message):
        judge_spec(spec, **kw)


@pytest.mark.parametrize("command", [["score", "x.jsonl"], ["serve-judge"], ["processbench"], ["tts", "x.jsonl"],
                                     ["train", "x.jsonl"], ["eval", "verifier", "x.jsonl", "-s", "arena"],
                                     ["eval", "headline"], ["eval", "judge"]])
def test_every_judge_command_has_the_options(command):
    res = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    for flag in ("--device", "--dtype", "--batch-tokens", "--threads"):
        assert flag in res.output, (command, flag)


def test_score_refuses_local_options_for_a_scorer_without_judge(tmp_path):
    rows = tmp_path / "r.jsonl"
    rows.write_text('{"id": "g", "problem": "1+1?", "answer": "2", "responses": ["2"]}\n')
    res = CliRunner().invoke(app, ["score", str(rows), "--scorer", "verifier", "--dtype", "float32",
                                   "--out", str(tmp_path / "o.jsonl")])
    # the flag the user set is named, not a judge they never gave (the default judge used to be put in and refused)
    assert res.exit_code != 0 and "invalid value for --dtype: scorer 'verifier' takes no judge" in res.output
    res = CliRunner().invoke(app, ["train", str(rows), "--scorer", "verifier", "--device", "cpu", "--steps", "1",
                                   "--out", str(tmp_path / "run")])
    assert res.exit_code != 0 and "invalid value for --device: scorer 'verifier' takes no judge" in res.output
    assert not (tmp_path / "run").exists()
    res = CliRunner().invoke(app, ["score", str(rows), "--scorer", "pointwise", "--batch-tokens", "0"])
    assert res.exit_code != 0 and "--batch-tokens" in res.output


# ---- print_table: console tables when the output is piped (CliRunner is not a terminal): every cell in full

def test_scorers_table_is_not_cut_when_piped():
    res = CliRunner().invoke(app, ["scorers"], env={"COLUMNS": "80"})
    assert res.exit_code == 0
    lines = res.output.splitlines()
    for o in scorer_options("arena"):  # each option on one line with its whole help text
        assert any(ln.startswith(o.name + "\t") and ln.endswith(o.help) for ln in lines), o.name
    assert "…" not in res.output


def test_score_summary_is_not_cut_when_piped(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"problem": "What is 2+3?", "answer": "5",
                                "responses": [r"\boxed{5}", r"\boxed{6}"]}) + "\n")
    res = CliRunner().invoke(app, ["score", str(rows), "--scorer", "verifier", "--out", str(tmp_path / "o.jsonl")],
                             env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    assert "non-diverse groups (routed by the scorer)\t" in res.output or "groups with equal rewards\t" in res.output
    assert "…" not in res.output


# ---- progress when stderr is not a terminal (a log file, CI): plain lines with rate and ETA

def test_progress_lines_when_not_a_terminal():
    import io

    from rewardkit.cli.common import JobProgress
    from rich.console import Console

    now = [100.0]
    buf = io.StringIO()
    with JobProgress("score arena", Console(file=buf, force_terminal=False), clock=lambda: now[0],
                     heartbeat=False) as p:
        p.start(50, done=10)  # a resumed job: 10 groups were done before
        for _ in range(40):
            now[0] += 2.0
            p.advance(1)
    lines = buf.getvalue().splitlines()
    # a line as groups finish, at most one per 5 s: every 3 groups (6 s) here, and the last
    assert lines[0] == "score arena: 13/50 groups (26%), 0.5 groups/s, ETA 1m14s"
    assert lines[-1] == "score arena: 50/50 groups (100%), 0.5 groups/s, took 1m20s"
    assert [int(x.split()[2].split("/")[0]) for x in lines] == [*range(13, 50, 3), 50]
    fast = io.StringIO()  # a resumed or cached run: thousands of groups a second, in plain digits
    with JobProgress("score verifier", Console(file=fast, force_terminal=False), clock=lambda: now[0],
                     heartbeat=False) as p:
        p.start(2500)
        now[0] += 2.0
        p.advance(2500)
    assert fast.getvalue() == "score verifier: 2500/2500 groups (100%), 1,250 groups/s, took 2s\n"  # was 1.25e+03
    slow = io.StringIO()
    with JobProgress("generate math", Console(file=slow, force_terminal=False), unit="problems",
                     clock=lambda: now[0], heartbeat=False) as p:
        p.start(2)
        now[0] += 90.0
        p.advance(1)  # 1 item = 5%+ of 2, 90 s since the start: shown, as seconds per item
    assert slow.getvalue() == "generate math: 1/2 problems (50%), 90 s per problem, ETA 1m30s\n"


def test_score_prints_progress_lines_to_a_log(tmp_path, monkeypatch):
    import rewardkit.cli.common as common

    monkeypatch.setattr(common, "PROGRESS_INTERVAL", 0.0)  # a line each time groups finish
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"id": f"g{i}", "problem": "2+3?", "answer": "5", "responses": [r"\boxed{5}"]})
                            + "\n" for i in range(12)))
    res = CliRunner().invoke(app, ["score", str(rows), "--batch-size", "3", "--out", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 0, res.output
    shown = [ln.split(",")[0] for ln in res.stderr.splitlines() if ln.startswith("score verifier: ")]
    # the first group alone (to time it), then the verifier is fast: the rest of each batch of 3 at once
    assert shown == [f"score verifier: {k}/12 groups ({k / 12:.0%})" for k in (1, 3, 6, 9, 12)], res.stderr


def test_eval_commands_write_under_the_git_ignored_run_folder():
    import inspect
    import subprocess
    from pathlib import Path

    from rewardkit.cli import eval as ev

    root = Path(__file__).resolve().parents[2]
    defaults = {name: inspect.signature(fn).parameters["out"].default
                for name, fn in vars(ev).items() if inspect.isfunction(fn) and "out" in inspect.signature(fn).parameters
                and isinstance(inspect.signature(fn).parameters["out"].default, Path)
                and not inspect.signature(fn).parameters["out"].default.suffix}  # folders (generate's is a file)
    assert {"lm_eval_cmd", "verifier", "select", "judge"} <= set(defaults), defaults
    for name, out in defaults.items():
        if out == Path("benchmarks/results"):  # headline/tables: the committed results
            continue
        assert out.parts[0] == "runs", (name, out)  # before: eval-out/ at the top of the checkout
        ignored = subprocess.run(["git", "check-ignore", "-q", str(out / "lm_eval.json")], cwd=root)
        assert ignored.returncode == 0, (name, out)


def test_no_model_loading_progress_bars_in_a_log(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"id": "g", "problem": "1+1?", "answer": "2", "responses": [r"\boxed{2}", r"\boxed{3}"]}) + "\n")
    cmd = [sys.executable, "-c", "import conftest; from rewardkit.cli.app import main; main()", "score", str(rows),
           "-s", "pointwise", "--judge", "smollm2", "--out", str(tmp_path / "o.jsonl")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parents[2])
    assert res.returncode == 0, res.stderr[-2000:]
    # before: transformers' "Loading weights: 100%|####| 272/272" bar, redrawn with carriage returns
    assert "Loading weights" not in res.stderr and "\r" not in res.stderr, res.stderr[-2000:]
    assert "score pointwise: 1/1 groups (100%)" in res.stderr


def test_a_line_while_one_item_takes_long():
    """A group that takes 40 s: a heartbeat line every 15 s says the job works on (tick, on a fake clock)."""
    import io

    from rewardkit.cli.common import JobProgress
    from rich.console import Console

    now = [0.0]
    buf = io.StringIO()
    p = JobProgress("score arena", Console(file=buf, force_terminal=False), clock=lambda: now[0], heartbeat=False)
    p.tick()  # not started: nothing
    p.start(800)
    for _ in range(40):
        now[0] += 1.0
        p.tick()
    p.advance(1)
    assert buf.getvalue().splitlines() == [
        "score arena: 0/800 groups (0%), 0 groups/s, working: none finished for 15s",
        "score arena: 0/800 groups (0%), 0 groups/s, working: none finished for 30s",
        "score arena: 1/800 groups (0%), 40 s per group, ETA 8h52m",
    ]
