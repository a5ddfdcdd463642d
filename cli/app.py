"""The ``rewardkit`` command line: thin typer commands over the SDK and the evaluation harness."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rewardkit.cli.common import (
    BatchTokens,
    Device,
    DType,
    FieldMap,
    JobProgress,
    OneLineErrors,
    Threads,
    check_scorer_judge,
    fail,
    judge_spec,
    option_judge,
    parse_pairs,
    print_table,
    quiet_progress_bars,
)
from rich.console import Console
from rich.table import Table

app = typer.Typer(help="rewardkit: reward modelling for LLM RL - score rollouts, serve judges, run evals.",
                  no_args_is_help=True, add_completion=False, cls=OneLineErrors)
console = Console(stderr=True)


def _version(value: bool) -> None:
    if value:
        from rewardkit import __version__

        typer.echo(f"rewardkit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", "-V", callback=_version, is_eager=True,
                                                help="Print rewardkit's version and exit.")] = False) -> None:
    """rewardkit: reward modelling for LLM RL - score rollouts, serve judges, run evals."""
    quiet_progress_bars()


@app.command()
def score(
    input: Annotated[Path, typer.Argument(help="Rollouts: grouped JSONL, per-response JSONL, Parquet or a saved HF dataset folder.")],
    scorer: Annotated[str, typer.Option("--scorer", "-s", help="Scorer name (see `rewardkit scorers`).")] = "verifier",
    # text, not a Path: pathlib would drop the trailing '/' of a path that names a folder (refused)
    out: Annotated[str, typer.Option("--out", help="Output JSONL, one row per group; re-run to resume.")] = "scores.jsonl",
    option: Annotated[Optional[list[str]], typer.Option("--option", "-o", help="Scorer option KEY=VALUE (repeatable).")] = None,
    judge: Annotated[Optional[str], typer.Option(help="Judge backend spec for judge-based scorers (e.g. smollm2).")] = None,
    # read as text and checked below, so a bad value is one `error:` line like every other bad option
    batch_size: Annotated[str, typer.Option(metavar="INTEGER", help="Groups per fsync'd write and at most per scorer call (a slow scorer gets fewer, so progress comes every few seconds).")] = "16",
    limit: Annotated[Optional[str], typer.Option(metavar="INTEGER", help="Score only the first N groups.")] = None,
    skip_bad: Annotated[bool, typer.Option("--skip-bad", help="Write malformed records to OUT.rejects.jsonl and go on.")] = False,
    group_key: Annotated[Optional[str], typer.Option(help="Group key field for one-response-per-line input.")] = None,
    field: FieldMap = None,
    with_texts: Annotated[bool, typer.Option("--with-texts", help="Output rows carry the prompt, responses and reference too.")] = False,
    fmt: Annotated[Optional[str], typer.Option("--format", help="grouped or flat (default: detect).")] = None,
    restart: Annotated[bool, typer.Option("--restart", help="Discard OUT's rows (a rewardkit output of any job) and start over.")] = False,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="Re-score groups with error/timeout responses; keep the others.")] = False,
    ray: Annotated[Optional[str], typer.Option("--ray", metavar="ADDRESS", help="Score on a Ray cluster: 'local' starts one on this machine, 'auto' or ray://HOST:PORT joins one.")] = None,
    ray_workers: Annotated[Optional[int], typer.Option(help="With --ray: scorer actors / concurrent tasks (default: the cluster's GPUs for judge scorers, else CPUs).")] = None,
    device: Device = None,
    dtype: DType = None,
    batch_tokens: BatchTokens = None,
    threads: Threads = None,
) -> None:
    """Score saved rollouts with any scorer; resumable, one output row per input group."""
    from rewardkit.integrations.common import load_scorer
    from rewardkit.runtime.inputs import FIELD_NAMES, InputError, field_names
    from rewardkit.runtime.jobs import JobError, positive_int, rejects_path, score_file

    try:  # checked before the scorer (and its judge) loads; score_file checks them the same way
        batch_size = positive_int("--batch-size", batch_size)
        limit = None if limit is None else positive_int("--limit", limit)
    except JobError as e:
        raise fail(e) from None
    try:
        fields = parse_pairs(field, "--field")
        field_names(fields)
        opts: dict = parse_pairs(option, "--option")
        judge = judge_spec(option_judge(opts, judge), device, dtype, batch_tokens, threads, scorer=scorer)
        sc = load_scorer(scorer, opts, judge)
        if judge is not None:
            opts["judge"] = judge
        executor = None
        if ray_workers is not None and ray is None:
            raise ValueError("--ray-workers needs --ray")
        check_scorer_judge(sc, load=ray is None)  # on Ray the workers load it: here it is only located
        if ray is not None:
            from rewardkit.runtime.ray_runner import RayConfig, ray_executor

            executor = ray_executor(scorer, opts, RayConfig(address=ray, workers=ray_workers))
    except (KeyError, TypeError, ValueError, ImportError) as e:  # a BadParameter goes on, naming its flag
        raise fail(e.args[0] if isinstance(e, KeyError) and e.args else e) from None

    with JobProgress(f"score {scorer}", console) as progress:

        def on_start(total: int, done: int) -> None:
            progress.start(total, done)
            if done:
                console.print(f"resuming: {done} of {total} groups already in {out}", soft_wrap=True)

        on_batch = None
        if executor is None:  # progress as groups finish (sub-batches of a few seconds), not once per batch
            from rewardkit.runtime.pacing import paced_executor

            executor = paced_executor(sc, progress.advance)
        else:
            on_batch = progress.advance
        try:
            summary = score_file(input, sc, out, batch_size=batch_size, skip_bad=skip_bad, group_key=group_key,
                                 fmt=fmt, limit=limit, restart=restart, retry_failed=retry_failed, options=opts,
                                 executor=executor, on_start=on_start, on_batch=on_batch,
                                 fields=fields, with_texts=with_texts,
                                 on_mkdir=lambda d: console.print(f"created folder {d} for --out", soft_wrap=True,
                                                                  markup=False, highlight=False))
        except InputError as e:
            hint = "" if skip_bad or e.line is None else " (--skip-bad sets such records aside and goes on)"
            raise fail(f"{e}{hint}") from None
        except (JobError, FileNotFoundError) as e:
            raise fail(e) from None
        except OSError as e:  # unwritable or full disk: finished rows are kept
            where = e.filename or out
            raise fail(f"{where}: {e.strerror or e}; finished rows are kept, re-run to resume") from None

    t = Table(title=f"{scorer} on {input.name}", show_header=False)
    d = summary.to_dict()
    t.add_row("groups in output", str(d["groups"]))
    t.add_row("scored now / already done / rejected", f"{d['scored_now']} / {d['skipped_done']} / {d['rejected']}")
    if retry_failed:
        t.add_row("failed groups retried", str(d["retried"]))
    t.add_row("statuses", ", ".join(f"{k}={v}" for k, v in sorted(d["statuses"].items())))
    t.add_row("reward mean (ok responses)", "-" if d["reward_mean"] is None else f"{d['reward_mean']:.4f}")
    label = "non-diverse groups (routed by the scorer)" if d["non_diverse_source"] == "routed" else "groups with equal rewards"
    t.add_row(label, "-" if d["non_diverse_fraction"] is None else f"{d['non_diverse_fraction']:.1%}")
    c = d["cost"]
    t.add_row("cost", f"judge calls {c['judge_calls']}, tokens {c['prompt_tokens']}+{c['completion_tokens']}, "
                      f"verifier calls {c['verifier_calls']}, cache hits {c['cache_hits']}, {c['seconds']:.1f}s")
    print_table(console, t)
    for status, reason in d["reasons"].items():  # why responses have no reward, one line per status
        hint = ""
        if "no reference answer" in reason and "reference" not in fields:
            hint = (f"; the input has no reference answer (looked for {', '.join(FIELD_NAMES['reference'])}; "
                    "TRL's completion logs hold none): name your column with --field reference=COLUMN")
        elif "no reference answer" in reason:  # a misspelt column reads as no reference, without a word
            hint = f"; read from the column named by --field reference={fields['reference']}: check its spelling"
        console.print(f"{status} {d['statuses'][status]}: {reason}{hint}", soft_wrap=True, markup=False, highlight=False)
    if d["exceptions"]:
        console.print(f"warning: scoring raised on {d['exceptions']} group(s), written with status error; "
                      f"first: {d['first_exception']}", soft_wrap=True)
    if skip_bad and d["rejected"]:
        console.print(f"{d['rejected']} rejected record(s) written to {rejects_path(out)}", soft_wrap=True)


@app.command()
def scorers(as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """List every scorer with a one-line description and its options."""
    from rewardkit.scoring import describe, scorer_names, scorer_options

    rows = []
    for name in scorer_names():
        try:
            opts = [o.__dict__ for o in scorer_options(name)]
        except (ImportError, AttributeError) as e:
            opts = [{"name": "-", "type": "-", "default": None, "help": f"unavailable: {e}"}]
        rows.append({"name": name, "description": describe(name), "options": opts})
    if as_json:
        typer.echo(json.dumps(rows, indent=2, default=str))
        return
    out = Console()
    for r in rows:
        t = Table(title=f"[bold]{r['name']}[/bold]: {r['description']}", title_justify="left", show_edge=False)
        for col in ("option", "type", "default", "meaning"):
            t.add_column(col, overflow="fold")
        for o in r["options"]:
            default = "" if o["default"] is None else repr(o["default"])
            t.add_row(o["name"], o["type"], default, o["help"])
        print_table(out, t)
        out.print()


# ---------------------------------------------------------------------- commands from other modules
from rewardkit.cli import eval as _eval  # noqa: E402
from rewardkit.cli import jury as _jury  # noqa: E402
from rewardkit.cli import processbench as _processbench  # noqa: E402
from rewardkit.cli import serve as _serve  # noqa: E402
from rewardkit.cli import serve_judge as _serve_judge  # noqa: E402
from rewardkit.cli import train as _train  # noqa: E402
from rewardkit.cli import tts as _tts  # noqa: E402

app.command("lean-check")(_jury.lean_check)
app.command("lean-doctor")(_jury.lean_doctor)
app.command("processbench")(_processbench.processbench)
app.command("serve-judge")(_serve_judge.serve_judge)
app.command("tts")(_tts.tts)
app.add_typer(_eval.app, name="eval")
app.command("train")(_train.train)
app.command("serve")(_serve.serve)


def main() -> None:
    app(prog_name="rewardkit")


if __name__ == "__main__":
    sys.exit(main())
