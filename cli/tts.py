"""`rewardkit tts`: pick one response per problem with a pairwise judge and report accuracy against labels.

The judge and selection options are the fields of ``rewardkit.raro.tts.TTSOptions`` (RARO Algorithm 3's
defaults; rewardkit's additions opt-in), read from that class by ``with_options``."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer
from rewardkit.cli.common import (
    BatchTokens,
    Device,
    DType,
    FieldMap,
    Threads,
    check_judge_spec,
    fail,
    judge_spec,
    parse_pairs,
    with_options,
)

from rewardkit.raro.tts import TTSOptions


@with_options(TTSOptions, panel="Judge and selection (TTSOptions)")
def tts(
    rollouts: Annotated[Path, typer.Argument(exists=True, dir_okay=False,
                                             help="JSONL rows with problem, responses, correct (optional answer, rm_scores).")],
    n: Annotated[str, typer.Option(help="Comma-separated pool sizes N (the first N responses of each problem).")] = "1,2,4,8",
    judge: Annotated[str, typer.Option(help="Judge backend spec (the model, e.g. smollm2), as in `rewardkit score --judge`.")] = "smollm2",
    device: Device = None,
    dtype: DType = None,
    batch_tokens: BatchTokens = None,
    threads: Threads = None,
    limit: Annotated[int | None, typer.Option(help="Use only the first LIMIT problems.")] = None,
    out: Annotated[Path | None, typer.Option(help="Write OUT.md, OUT.json and OUT.png.")] = None,
    field: FieldMap = None,
    *,
    options: TTSOptions,
) -> None:
    """Test-time scaling: single-elimination tournament (RARO Algorithm 3) and BT selection vs majority, random, oracle."""
    from rewardkit.evals.tts import accuracy_table, check_pool_sizes, load_rollouts, run_tts, write_report

    from rewardkit.options import coerce

    try:
        ns = coerce(n, tuple[int, ...])
    except ValueError as e:
        raise fail(f"--n: {e}") from None
    problems = load_rollouts(str(rollouts), limit, parse_pairs(field, "--field"))
    try:
        check_pool_sizes(problems, ns)
    except ValueError as e:
        raise fail(f"--n: {e}") from None
    judge = judge_spec(judge, device, dtype, batch_tokens, threads) or judge
    # a judge that cannot answer is one error line here, not a table of matches kept by the order fallback
    res = run_tts(problems, check_judge_spec(judge), ns, options)
    res["settings"].update(rollouts=str(rollouts), limit=limit)
    typer.echo(accuracy_table(res["rows"]))
    typer.echo(f"judge cost: {res['cost']}")
    for n, status in res["match_status"].items():  # said here, not only in OUT.md: a failing judge looks like one
        if status.get("invalid"):
            typer.echo(f"warning: N={n}: {status['invalid']} of {sum(status.values())} tournament matches had no "
                       "valid vote (the judge failed or wrote no verdict); the earlier candidate was kept", err=True)
    if out is not None:
        cmd = "rewardkit tts " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if len(sys.argv) > 1 else "rewardkit tts"
        for f in write_report(res, str(out), f"Test-time scaling with the {options.prompt} judge prompt", cmd):
            typer.echo(f"wrote {f}")
