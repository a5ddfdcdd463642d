"""``rewardkit eval``: accuracy (pass@k / avg@k / maj@k), a scorer as a verifier, best-of-N selection,
judge quality, response generation, the headline table and the regeneration of every committed table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markdown import Markdown
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

app = typer.Typer(help="Evaluation harness: pass@k, verifier precision/recall, best-of-N, judge quality, tables.",
                  no_args_is_help=True)
console = Console(stderr=True)


def _fail(msg: str, code: int = 2) -> typer.Exit:
    console.print(f"[red]error:[/red] {msg}", soft_wrap=True)
    return typer.Exit(code)


def _opts(pairs: list[str] | None) -> dict[str, str]:
    from rewardkit.cli.app import _parse_options

    return _parse_options(pairs or [])


def _progress(label: str) -> Progress:
    return Progress(TextColumn(f"[bold]{label}[/bold]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TimeRemainingColumn(), console=console)


def _show(md: str) -> None:
    Console().print(Markdown(md))


Rollouts = Annotated[Path, typer.Argument(help="Rollouts file (grouped JSONL with responses, as `rewardkit score` reads).")]
OutDir = Annotated[Path, typer.Option("--out", help="Folder for the Markdown + JSON (+ PNG) reports and scores.")]
Limit = Annotated[Optional[int], typer.Option(help="Only the first N groups.")]


@app.command()
def accuracy(
    rollouts: Rollouts,
    out: OutDir = Path("eval-out"),
    grade: Annotated[str, typer.Option(help="auto (labels when present), labels or verifier.")] = "auto",
    k: Annotated[Optional[list[int]], typer.Option("--k", help="k values (default: every power of 2 up to n).")] = None,
    limit: Limit = None,
) -> None:
    """pass@k / avg@k / maj@k for every k <= n that is a power of 2; writes accuracy.md and accuracy.json."""
    from rewardkit.evals.harness import (
        EvalError,
        accuracy_markdown,
        accuracy_report,
        load_rollouts,
        write_report,
    )

    try:
        groups = load_rollouts(rollouts, limit=limit)
        rep = accuracy_report(groups, by=grade, ks=k)  # type: ignore[arg-type]
    except (EvalError, FileNotFoundError, ValueError) as e:
        raise _fail(str(e)) from None
    rep["input"] = str(rollouts)
    md = accuracy_markdown(rep, f"Accuracy on {rollouts.name}")
    write_report(out, "accuracy", rep, md)
    _show(md)
    console.print(f"written: {out / 'accuracy.md'}, {out / 'accuracy.json'}")


def _score_all(rollouts: Path, scorers: list[str], out: Path, options: list[str] | None, judge: str | None,
               limit: int | None, batch_size: int):
    from rewardkit.evals.harness import EvalError, labels_of, load_rollouts, score_groups

    from rewardkit.scoring import scorer_options

    try:
        groups = load_rollouts(rollouts, limit=limit)
        correct = labels_of(groups, "this evaluation")
    except (EvalError, FileNotFoundError, ValueError) as e:
        raise _fail(str(e)) from None
    runs = []
    for s in scorers:
        opts: dict = dict(_opts(options))
        try:
            names = {o.name for o in scorer_options(s)}
        except KeyError as e:
            raise _fail(str(e).strip("'\"")) from None
        opts = {k: v for k, v in opts.items() if k in names}
        if judge is not None and "judge" in names:
            opts["judge"] = judge
        with _progress(s) as prog:
            task = prog.add_task(s, total=None)
            try:
                runs.append(score_groups(groups, s, out, options=opts, batch_size=batch_size,
                                         on_start=lambda t, d, task=task: prog.update(task, total=t, completed=d),
                                         on_batch=lambda n, task=task: prog.advance(task, n)))
            except (EvalError, TypeError, ValueError) as e:
                raise _fail(f"scorer {s!r}: {e}") from None
    return groups, correct, runs


ScorerOpt = Annotated[list[str], typer.Option("--scorer", "-s", help="Scorer name (repeatable).")]
OptionOpt = Annotated[Optional[list[str]], typer.Option("--option", "-o", help="Scorer option KEY=VALUE (repeatable; given to the scorers that have it).")]
JudgeOpt = Annotated[Optional[str], typer.Option(help="Judge backend spec for judge-based scorers.")]
BatchOpt = Annotated[int, typer.Option(help="Groups per scorer call.")]


@app.command()
def verifier(rollouts: Rollouts, scorer: ScorerOpt, out: OutDir = Path("eval-out"), option: OptionOpt = None,
             judge: JudgeOpt = None, limit: Limit = None, batch_size: BatchOpt = 8,
             n_boot: Annotated[int, typer.Option(help="Bootstrap resamples.")] = 1000,
             seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0) -> None:
    """Precision / recall / F1 / accuracy of each scorer as a verifier against the `correct` labels, with
    seeded bootstrap 95% intervals; writes verifier.md and verifier.json (scores are resumable)."""
    from rewardkit.evals.harness import scorer_report, verifier_markdown, write_report

    groups, correct, runs = _score_all(rollouts, scorer, out, option, judge, limit, batch_size)
    reps = [scorer_report(groups, r, correct=correct, n_boot=n_boot, seed=seed) for r in runs]
    md = verifier_markdown(reps, f"Scorers as verifiers on {rollouts.name}")
    write_report(out, "verifier", {"input": str(rollouts), "reports": reps}, md)
    _show(md)


@app.command()
def select(rollouts: Rollouts, scorer: ScorerOpt, out: OutDir = Path("eval-out"), option: OptionOpt = None,
           judge: JudgeOpt = None, limit: Limit = None, batch_size: BatchOpt = 8) -> None:
    """Best-of-N with each scorer as the selector: curves (select.png), AUC, length bias; writes
    select.md and select.json."""
    from rewardkit.evals.harness import (
        plot_best_of_n,
        scorer_report,
        select_markdown,
        selection_baselines,
        write_report,
    )

    groups, correct, runs = _score_all(rollouts, scorer, out, option, judge, limit, batch_size)
    reps = [scorer_report(groups, r, correct=correct, n_boot=200) for r in runs]
    base = selection_baselines(correct)
    md = select_markdown(reps, f"Best-of-N selection on {rollouts.name}", base)
    write_report(out, "select", {"input": str(rollouts), "baselines": base, "reports": reps}, md)
    plot_best_of_n(reps, correct, out / "select.png", f"best-of-n on {rollouts.name}")
    _show(md)
    console.print(f"written: {out / 'select.md'}, {out / 'select.json'}, {out / 'select.png'}")
