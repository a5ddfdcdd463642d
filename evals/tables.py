"""``rewardkit eval tables``: regenerate benchmarks/results/ from the committed run configs
(``benchmarks/runs.json``: each results file with the command that produces it) and rewrite the README's
tables between ``<!-- rewardkit:table NAME -->`` / ``<!-- rewardkit:end NAME -->`` markers from the results
JSON. ``check`` finds what is stale without running anything: a README table that differs from its JSON, a
Markdown report that differs from its JSON, a listed output that is missing; ``unlisted`` names results
files no config lists.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_BLOCK = re.compile(r"(<!-- rewardkit:table (?P<name>[a-z_]+) -->\n)(?P<body>.*?)(<!-- rewardkit:end (?P=name) -->)", re.S)


@dataclass(frozen=True)
class Run:
    """One producer: a command and the results files it writes (``judge``: runs a judge model)."""

    name: str
    command: str
    outputs: tuple[str, ...]
    judge: bool
    slow: bool
    seconds: float | None


def load_runs(root: Path = ROOT) -> list[Run]:
    """The committed run configs."""
    cfg = json.loads((root / "benchmarks" / "runs.json").read_text())
    return [Run(r["name"], r["command"], tuple(r["outputs"]), bool(r["judge"]), bool(r["slow"]), r.get("seconds"))
            for r in cfg["runs"]]


def _results(root: Path) -> Path:
    return root / "benchmarks" / "results"


def _json(root: Path, name: str) -> dict[str, Any]:
    return json.loads((_results(root) / name).read_text())


# ------------------------------------------------------------------------------------ README tables


def _accuracy_table(d: dict[str, Any]) -> str:
    from rewardkit.evals.harness import accuracy_markdown

    md = accuracy_markdown(d, "")
    return md[md.index("| k |"):]


def _judge_table(d: dict[str, Any]) -> str:
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.0f}%"

    lines = ["| prompt | mode | pairs | accuracy | debiased | first-position bias | worst injection flip rate (single / debiased) |",
             "|---|---|---|---|---|---|---|"]
    inj = {(i["prompt"], i["mode"]): i for i in d["injection"]}
    for key, what in (("rollout_pairs", "rollouts"), ("processbench_pairs", "ProcessBench")):
        for r in d[key]:
            i = inj.get((r["prompt"], r["mode"])) if key == "rollout_pairs" else None
            worst = "-"
            if i:
                single = max((t["flip_rate"] for t in i["table"] if t["flip_rate"] is not None), default=None)
                deb = max((t["flip_rate_debiased"] for t in i["table"] if t["flip_rate_debiased"] is not None), default=None)
                worst = f"{pct(single)} / {pct(deb)}"
            b = r["first_position_bias"]
            lines.append(f"| {r['prompt']} ({what}) | {r['mode']} | {r['pairs']} | {pct(r['accuracy'])} | "
                         f"{pct(r['debiased_accuracy'])} | {'-' if b is None else f'{b:+.2f}'} | {worst} |")
    return "\n".join(lines) + "\n"


def _headline_table(d: dict[str, Any]) -> str:
    from rewardkit.evals.headline import headline_table

    return headline_table(d)


def _judge_training_table(d: dict[str, Any]) -> str:
    """Trained judges before/after on held-out problems (benchmarks/judge_training.py)."""
    def f(x: Any) -> str:
        return "-" if x is None or x != x else f"{x:.3f}"

    lines = ["| judge | held out | metric | untrained | trained |", "|---|---|---|---|---|"]
    g = d.get("gar_discriminator")
    if g and g.get("after"):
        b, a = g["before"], g["after"]
        n = f"{g['heldout_solutions']} ProcessBench solutions, {b['n']} labelled slices"
        for k, name in (("auroc", "slice AUROC of P(YES)"), ("balanced_accuracy", "slice balanced accuracy"),
                        ("f1", "ProcessBench F1")):
            lines.append(f"| GAR discriminator (stage-1 SFT) | {n} | {name} | {f(b[k])} | {f(a[k])} |")
    c = d.get("raro_critic")
    if c and c.get("after"):
        b, a = c["before"], c["after"]
        n = f"{b['n']} expert/policy pairs"
        for mode, bb, aa in (("generate", b, a), ("logit", b["logit"], a["logit"])):
            for k, name in (("accuracy", "names the expert"), ("tie_rate", "tie rate")):
                lines.append(f"| RARO critic (warm start + RL) | {n} | {name} ({mode}) | {f(bb[k])} | {f(aa[k])} |")
    h = d.get("headline")
    if h:
        rows = {(r["scorer"], r.get("mode"), r["judge"] == "untrained"): r for r in h["reports"] if r["uses_judge"]}
        n = f"{len(h['groups'])} mixed rollout groups"
        for (scorer, mode, untrained), b in rows.items():
            a = rows.get((scorer, mode, False))
            if not untrained or a is None:
                continue
            for k, name in (("auc", "AUC"), ("best_of_8", "best-of-8 accuracy")):
                lines.append(f"| headline `{scorer}` ({mode}) | {n} | {name} | {f(b[k])} | {f(a[k])} |")
    return "\n".join(lines) + "\n"


# README table name -> (results JSON, renderer)
TABLES: dict[str, tuple[str, Callable[[dict[str, Any]], str]]] = {
    "headline": ("headline.json", _headline_table),
    "accuracy": ("accuracy.json", _accuracy_table),
    "judge_quality": ("judge_quality.json", _judge_table),
    "judge_training": ("judge_training.json", _judge_training_table),
}


def render(name: str, root: Path = ROOT) -> str:
    """A README table from its results JSON."""
    src, fn = TABLES[name]
    return fn(_json(root, src))


def rewrite_readme(text: str, root: Path = ROOT) -> tuple[str, list[str]]:
    """The README with every marked table re-rendered; also the names of the tables that changed."""
    changed: list[str] = []

    def sub(m: re.Match) -> str:
        name = m.group("name")
        if name not in TABLES:
            raise KeyError(f"README marks an unknown table {name!r}; known: {', '.join(TABLES)}")
        if not (_results(root) / TABLES[name][0]).exists():
            return m.group(0)  # no results yet: left as it is (check() reports the missing file)
        body = render(name, root)
        if body != m.group("body"):
            changed.append(name)
        return m.group(1) + body + m.group(4)

    return _BLOCK.sub(sub, text), changed


# ----------------------------------------------------------------------------------------- reports


def _report_markdown(root: Path, name: str) -> str | None:
    """The Markdown report ``rewardkit eval`` writes for a results JSON it produced (None: not ours)."""
    d = _json(root, f"{name}.json")
    if name == "accuracy":
        from rewardkit.evals.harness import accuracy_markdown

        return accuracy_markdown(d, f"Accuracy on {d['input']}")
    if name == "headline":
        from rewardkit.evals.headline import headline_markdown

        return headline_markdown(d, d["command"])
    if name == "judge_quality":
        from rewardkit.evals.judge_quality import judge_quality_markdown

        return judge_quality_markdown(d)
    return None


def records(root: Path = ROOT) -> dict[str, str]:
    """Results kept as the record of a run `eval tables` cannot repeat (another machine, an old commit), by
    file stem, with the reason (``records`` in runs.json)."""
    return json.loads((root / "benchmarks" / "runs.json").read_text()).get("records", {})


def unlisted(root: Path = ROOT) -> list[str]:
    """Results files that no run config lists and no record names (`eval tables` cannot regenerate them): a
    warning, not a failure, so a helper who adds a benchmark does not break the check before adding its config."""
    listed = {o for r in load_runs(root) for o in r.outputs}
    kept = set(records(root))
    res = _results(root)
    return [f.name for f in sorted(res.iterdir()) if f.is_file() and f.name not in listed
            and f.name.split(".")[0] not in kept] if res.exists() else []


def check(root: Path = ROOT) -> list[str]:
    """Everything stale, one line each (empty: README and results agree)."""
    problems = []
    runs = load_runs(root)
    res = _results(root)
    for r in runs:
        for o in r.outputs:
            if not (res / o).exists():
                problems.append(f"benchmarks/results/{o}: missing (produced by `{r.command}`)")
    for name in ("accuracy", "headline", "judge_quality"):
        if (res / f"{name}.json").exists() and (res / f"{name}.md").exists():
            want = _report_markdown(root, name)
            if want is not None and (res / f"{name}.md").read_text() != want.rstrip() + "\n":
                problems.append(f"benchmarks/results/{name}.md: differs from {name}.json (re-render with `rewardkit eval tables`)")
    readme = (root / "README.md").read_text()
    marked = {m.group("name") for m in _BLOCK.finditer(readme)}
    for name in sorted(marked - set(TABLES)):
        problems.append(f"README.md: unknown table marker {name!r}")
    _, changed = rewrite_readme(readme, root) if marked <= set(TABLES) else (None, [])
    for name in changed:
        problems.append(f"README.md: table {name!r} differs from benchmarks/results/{TABLES[name][0]}")
    return problems


# -------------------------------------------------------------------------------------- regenerate


def command_argv(cmd: str, root: Path = ROOT) -> list[str]:
    """A run's command line as argv: ``rewardkit ...`` runs this checkout's CLI, ``python`` this
    interpreter, ``{shared}`` is the shared folder."""
    from rewardkit.evals.data import shared_dir

    argv = shlex.split(cmd.replace("{shared}", str(shared_dir())))
    if argv[0] == "rewardkit":
        return [sys.executable, "-c", "import conftest; from rewardkit.cli.app import main; main()", *argv[1:]]
    if argv[0] == "python":
        return [sys.executable, *argv[1:]]
    return argv


def regenerate(root: Path = ROOT, *, only: list[str] | None = None, slow: bool = False, run: bool = True,
               on_run: Callable[[Run], None] | None = None) -> list[dict[str, Any]]:
    """Run the selected producers (non-slow ones unless ``slow``; none with ``run=False``), then re-render
    the Markdown reports and the README tables. Returns one record per run (seconds, exit status)."""
    import os

    runs = load_runs(root)
    if only:
        unknown = sorted(set(only) - {r.name for r in runs})
        if unknown:
            raise KeyError(f"unknown run {unknown[0]!r}; runs: {', '.join(r.name for r in runs)}")
    done = []
    env = {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for r in runs if run else []:
        if (only and r.name not in only) or (not only and r.slow and not slow):
            continue
        if on_run:
            on_run(r)
        t0 = time.perf_counter()
        p = subprocess.run(command_argv(r.command, root), cwd=root, env=env, capture_output=True, text=True)
        done.append({"name": r.name, "seconds": time.perf_counter() - t0, "returncode": p.returncode,
                     "stderr_tail": p.stderr[-2000:] if p.returncode else ""})
    for name in ("accuracy", "headline", "judge_quality"):
        if (_results(root) / f"{name}.json").exists():
            (_results(root) / f"{name}.md").write_text(_report_markdown(root, name).rstrip() + "\n")
    readme = root / "README.md"
    new, _ = rewrite_readme(readme.read_text(), root)
    readme.write_text(new)
    return done
