"""The README's claims about the Python API and the CLI hold (its examples run as written)."""

import re
from pathlib import Path

import numpy as np

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_python_section_opens_with_rewardkit_score_on_a_list_of_dicts():
    block = re.search(r"## From Python\n\n```python\n(.*?)```", README, re.S).group(1)
    assert "rewardkit.score(rows" in block
    ns: dict = {}
    exec(block, ns)  # noqa: S102 - our own README
    assert isinstance(ns["rows"], list) and all(isinstance(r, dict) for r in ns["rows"])
    assert [(r["reward"], r["status"]) for r in ns["scored"]] == [(1.0, "ok"), (0.0, "ok")]  # as its comment says


def test_python_example_runs_and_gives_the_stated_values():
    block = re.search(r"## From Python\n.*?Groups and scores underneath:\n\n```python\n(.*?)```", README, re.S).group(1)
    ns: dict = {}
    exec(block, ns)  # noqa: S102 - our own README
    s = ns["scores"][0]
    assert np.array_equal(s.rewards, [1.0, 1.0, 0.0])  # as the README's comment says
    assert [x.value for x in s.statuses] == ["ok", "ok", "ok"]
    assert tuple(ns["rewards"].shape) == (1, 3) and ns["mask"].all()


def test_ci_runs_the_readme_test_command():
    cmd = re.search(r"\*\*Install and run the whole test suite\*\*.*?```bash\n(.*?)\n```", README, re.S).group(1)
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    normalise = lambda s: re.sub(r"\s+", " ", s.replace(" -q ", " ").replace("pip install -q", "pip install"))  # noqa: E731
    assert normalise(cmd) in normalise(ci)


def test_every_documented_command_exists():
    from rewardkit.cli.app import app
    from typer.main import get_command

    root = get_command(app)
    names = set(root.commands) | {o for p in root.params for o in p.opts}  # commands and top-level options
    documented = set(re.findall(r"`rewardkit ([a-z-]+)", README))
    assert documented <= names, documented - names


def test_one_shape_example_runs():
    block = re.search(r"### One shape for every scorer\n.*?```python\n(.*?)```", README, re.S).group(1)
    ns: dict = {}
    exec(block, ns)
    assert ns["scorer"].options.schedule == "round-robin" and ns["scorer"].options.gamma == 0.9
