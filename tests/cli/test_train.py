"""`rewardkit train` takes every KEY=VALUE through one flag, `--set` (before: `-o` scorer options, `-t`/`--set`
trainer settings, `-m` training-mode options), and `--method` names RARO / GAR, so "mode" is only the judge's
verdict mode."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rewardkit.cli.app import app
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "import conftest; from rewardkit.cli.app import main; main()"]


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    p = tmp_path / "p.jsonl"
    p.write_text(json.dumps({"prompt": "1+1?", "answer": "2"}) + "\n")
    return p


def error_line(*args: object) -> str:
    res = subprocess.run([*CLI, "train", *map(str, args)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), res.stderr[-2000:]
    return lines[0]


def test_one_key_value_flag():
    help_text = CliRunner().invoke(app, ["train", "--help"], terminal_width=200).output
    flags = set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", help_text))
    assert "--set" in flags and "--method" in flags
    assert not flags & {"-o", "--option", "-t", "-m", "--training-option", "--training-mode"}, flags


def test_set_routes_each_key_to_the_part_that_declares_it():
    from rewardkit.cli.train import build_method, split_settings

    trainer, other = split_settings({"lr": "1e-5", "lambda_pol": "0.5", "scorer.temperature": "0.3",
                                     "trainer.seed": "3", "temperature": "0.9", "mode": "generate"})
    # trainer settings by name (TrainConfig's fields); `scorer.` sends a shared name to the scorer / method
    assert trainer == {"lr": "1e-5", "seed": "3", "temperature": "0.9"}
    assert other == {"lambda_pol": "0.5", "temperature": "0.3", "mode": "generate"}
    raro = build_method("raro", other)
    assert raro.options.lambda_pol == 0.5 and raro.options.scorer.temperature == 0.3
    assert raro.options.scorer.mode == "generate"  # `mode`: the critic's verdict mode, nothing else


def test_a_judge_that_cannot_answer_stops_train_before_the_policy_loads(prompts, tmp_path, monkeypatch):
    """Before: `train --scorer pointwise --judge URL` with no server there built the trainer (loading the policy)
    first: the judge was first asked inside a training step, where its failure is an error status per response."""
    import socket

    import rewardkit.grpo

    def no_trainer(*a, **kw):
        raise AssertionError("the trainer was built")

    monkeypatch.setattr(rewardkit.grpo, "GRPOTrainer", no_trainer)
    with socket.socket() as s:  # bound, not listening
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
        res = CliRunner().invoke(app, ["train", str(prompts), "--scorer", "pointwise", "--judge", url, "--steps", "1",
                                       "--out", str(tmp_path / "run")])
    assert res.exit_code == 2 and res.stderr.startswith(f"error: judge {url}: GET {url}/models failed"), res.output
    assert res.stderr.count("\n") == 1 and not (tmp_path / "run").exists()


def test_set_judge_is_the_judge_and_is_never_replaced(prompts, tmp_path, monkeypatch, no_default_judge):
    """Before: `--set judge=URL --judge OTHER` trained on OTHER's rewards, and `--set judge=URL --device cpu` on
    the default smollm2's (the local-judge options filled in the default judge, which replaced the one set)."""
    import rewardkit.grpo

    def no_trainer(*a, **kw):
        raise AssertionError("the trainer was built")

    monkeypatch.setattr(rewardkit.grpo, "GRPOTrainer", no_trainer)
    url = "http://127.0.0.1:9/v1"
    for extra, message in ((["--judge", "nosuchmodel"], f"--set judge={url} and --judge nosuchmodel name two judges"),
                           (["--device", "cpu"], f"--device apply to a local transformers judge, not '{url}'")):
        res = CliRunner().invoke(app, ["train", str(prompts), "--scorer", "pointwise", "--set", f"judge={url}", *extra,
                                       "--steps", "1", "--out", str(tmp_path / "run")])
        assert res.exit_code == 2 and res.stderr.startswith(f"error: invalid value for --judge: {message}"), res.output


def test_a_key_nobody_declares_is_one_line_naming_where_it_was_looked_for(prompts):
    line = error_line(prompts, "--set", "foo=1")
    assert "'foo'" in line and "scorer 'verifier'" in line and "--help-settings" in line, line
    line = error_line(prompts, "--method", "raro", "--set", "foo=1")
    assert "method 'raro'" in line and "'foo'" in line and "mode 'raro'" not in line, line
    line = error_line(prompts, "-s", "arena", "--set", "mode=logits")  # the scorer's verdict mode, checked
    assert "option 'mode': must be one of auto, generate, logit, got 'logits'" in line, line
    assert "unknown method 'bogus'" in error_line(prompts, "--method", "bogus")
