"""`rewardkit processbench`: GAR's slice discriminator on ProcessBench (earliest-error identification)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rewardkit.cli.common import BatchTokens, Device, DType, Threads, check_judge_spec, fail, judge_spec
from rewardkit.evals.processbench import SPLITS, Unit, format_table, predictions_to_rows, run_processbench

from rewardkit.backends.spec import redact
from rewardkit.scoring import VerdictMode


def processbench(
    split: Annotated[list[str] | None, typer.Option("--split", help=f"split(s) to run: {', '.join(SPLITS)} (default all)")] = None,
    limit: Annotated[int | None, typer.Option(help="rows per split, half erroneous / half correct (default: all)")] = None,
    judge: Annotated[str, typer.Option(help="judge backend spec: smollm2, a local model dir or a hub id")] = "smollm2",
    device: Device = None,
    dtype: DType = None,
    batch_tokens: BatchTokens = None,
    threads: Threads = None,
    mode: Annotated[VerdictMode, typer.Option(help="logit (P(YES), one forward pass per step) or generate (App. B, K tokens)")] = "logit",
    unit: Annotated[Unit, typer.Option(help="steps (each labelled step is a slice) or reslice (GAR slicing of the joined steps)")] = "steps",
    context: Annotated[bool, typer.Option(help="show the discriminator the earlier steps as context")] = False,
    threshold: Annotated[float, typer.Option(help="P(YES) below which a step is NO (logit mode)")] = 0.5,
    max_tokens: Annotated[int, typer.Option(help="K, max discriminator output tokens (generate mode)")] = 128,
    slice_tokens: Annotated[int, typer.Option(help="L, slice token budget (reslice mode)")] = 320,
    seed: Annotated[int, typer.Option(help="seed of the balanced subset")] = 0,
    out: Annotated[Path | None, typer.Option(help="write OUT.json (summary + per-row predictions) and OUT.md")] = None,
) -> None:
    """Judge every step of every ProcessBench solution with GAR's discriminator and report ProcessBench's
    metric (accuracy on erroneous / correct solutions, F1) plus step-level precision and recall."""
    from rewardkit.gar.slices import SliceScorer

    splits = split or list(SPLITS)
    bad = [s for s in splits if s not in SPLITS]
    if bad:
        raise typer.BadParameter(f"unknown split(s) {bad}; choose from {', '.join(SPLITS)}", param_hint="--split")
    # a judge that cannot answer is one error line here, not a table of invalid verdicts ("acc. correct 100.0")
    backend = check_judge_spec(judge_spec(judge, device, dtype, batch_tokens, threads) or judge)
    try:
        scorer = SliceScorer(judge=backend, mode=mode, threshold=threshold, max_tokens=max_tokens,
                             slice_tokens=slice_tokens, context=context)
    except ValueError as e:
        raise fail(e) from None
    t0 = time.perf_counter()
    summary, preds = run_processbench(scorer, splits, limit, unit, seed=seed)
    seconds = time.perf_counter() - t0
    table = format_table(summary)
    typer.echo(table)
    typer.echo(f"\n{sum(len(p.verdicts) for p in preds)} units judged in {seconds:.0f} s")
    if out is not None:
        config = {"backend": redact(backend.model_id or judge), "mode": mode, "unit": unit, "context": context,
                  "threshold": threshold, "limit": limit, "seed": seed, "splits": splits, "seconds": seconds}
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps(
            {"config": config, "summary": summary, "predictions": predictions_to_rows(preds)}, indent=1, default=str))
        out.with_suffix(".md").write_text(f"# ProcessBench: GAR slice discriminator\n\n`{json.dumps(config)}`\n\n{table}\n")
