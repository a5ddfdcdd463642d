"""``rewardkit train``: the minimal GRPO trainer over any scorer (options come from TrainConfig's fields)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Optional

import typer
from rewardkit.cli.common import (
    BatchTokens,
    Device,
    DType,
    Threads,
    check_scorer_judge,
    judge_spec,
    option_judge,
    parse_pairs,
)

#: a ``--set`` key's prefix that says which part takes it, when a name is both a trainer setting and an option
TRAINER, SCORER = "trainer.", "scorer."


def split_settings(pairs: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``--set`` pairs split into (trainer settings, the scorer's or the method's options): a ``TrainConfig``
    field is a trainer setting unless written ``scorer.KEY``; ``trainer.KEY`` says it outright."""
    from rewardkit.grpo import TrainConfig

    names = {f.name for f in dataclasses.fields(TrainConfig)}
    trainer, other = {}, {}
    for k, v in pairs.items():
        if k.startswith(SCORER):
            other[k[len(SCORER):]] = v
        elif k.startswith(TRAINER) or k in names:
            trainer[k.removeprefix(TRAINER)] = v
        else:
            other[k] = v
    return trainer, other


def train_config(settings: dict[str, str], **direct: object):
    """A TrainConfig from ``KEY=VALUE`` strings (coerced to each field's type) plus direct values."""
    from rewardkit.grpo import TrainConfig
    from rewardkit.options import coerce_options

    try:
        kw = coerce_options(TrainConfig, settings, "rewardkit train --set")
        kw.update({k: v for k, v in direct.items() if v is not None})
        return TrainConfig(**kw)
    except (TypeError, ValueError) as e:
        raise typer.BadParameter(str(e), param_hint="--set") from None


def _not_a_setting(e: object, what: str) -> typer.BadParameter:
    return typer.BadParameter(f"{e}: not an option of {what}, nor a trainer setting (rewardkit train --help-settings)",
                              param_hint="--set")


def build_method(name: str, options: dict[str, str]):
    """A training method (RARO, GAR) from its name and ``KEY=VALUE`` options (the method's own, else its
    scorer's)."""
    from rewardkit.grpo.modes import build_mode as build

    try:
        return build(name, options)
    except (TypeError, ValueError) as e:
        if "unknown mode" in str(e):
            raise typer.BadParameter(str(e).replace("mode", "method"), param_hint="--method") from None
        raise _not_a_setting(str(e).replace(f"mode {name!r}", f"method {name!r}"), f"method {name!r}") from None


def _settings_help() -> str:
    from rewardkit.grpo import TrainConfig

    return "Settings (--set KEY=VALUE):\n" + "\n".join(
        f"  {f.name} [{f.default!r}]: {f.metadata['help']}" for f in dataclasses.fields(TrainConfig))


def train(
    prompts: Annotated[Optional[Path], typer.Argument(help="JSONL prompts: prompt/problem/question, optional answer and solution.")] = None,
    scorer: Annotated[str, typer.Option("--scorer", "-s", help="Scorer name (see `rewardkit scorers`) or module:Class.")] = "verifier",
    judge: Annotated[Optional[str], typer.Option(help="Judge backend spec for judge-based scorers.")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="Run folder (checkpoints, metrics.jsonl); re-run to resume.")] = None,
    steps: Annotated[Optional[int], typer.Option(help="Total optimizer steps.")] = None,
    setting: Annotated[Optional[list[str]], typer.Option("--set", help="KEY=VALUE (repeatable): a trainer setting (see --help-settings), else an option of the scorer or of the --method; trainer.KEY / scorer.KEY where a name is both. `mode` is the judge's verdict mode.")] = None,
    limit: Annotated[Optional[int], typer.Option(help="Use only the first N prompts.")] = None,
    method: Annotated[Optional[str], typer.Option("--method", help="Training method around GRPO: raro (shared-LLM critic) or gar (joint discriminator); supplies the scorer.")] = None,
    help_settings: Annotated[bool, typer.Option("--help-settings", help="List every trainer setting and exit.")] = False,
    device: Device = None,
    dtype: DType = None,
    batch_tokens: BatchTokens = None,
    threads: Threads = None,
) -> None:
    """Train a policy with GRPO / CISPO on rewards from any scorer; resumes from the run folder after a kill."""
    if help_settings:
        typer.echo(_settings_help())
        raise typer.Exit()
    if prompts is None:
        raise typer.BadParameter("a prompts file is required", param_hint="PROMPTS")
    from rewardkit.grpo import GRPOTrainer, read_prompts
    from rewardkit.grpo.checkpoint import checkpoint_summary
    from rewardkit.grpo.samplers import WeightSyncError
    from rewardkit.integrations.common import load_scorer

    trainer_settings, options = split_settings(parse_pairs(setting, "--set"))
    cfg = train_config(trainer_settings, out_dir=str(out) if out else None, steps=steps)
    modes = [build_method(method, options)] if method else []
    if not method:  # --set judge=SPEC is the scorer's judge, as --judge is (a method's judge is its own option)
        judge = option_judge(options, judge, "--set")
    judge = judge_spec(judge, device, dtype, batch_tokens, threads, scorer=None if method else scorer)
    sc = None
    if not method:
        try:
            sc = load_scorer(scorer, options, judge)
        except (TypeError, ValueError) as e:
            raise _not_a_setting(e, f"scorer {scorer!r}") from None
        check_scorer_judge(sc)  # before the policy loads: a dead judge would mask every reward of the run
    trainer = GRPOTrainer(cfg, read_prompts(prompts, limit), sc, modes)
    typer.echo(f"policy: {trainer.learner.backend.describe()}; rollouts sampled with {trainer.learner.sampler.name}",
               err=True)
    if trainer.step:
        typer.echo(f"resuming {cfg.out_dir} at step {trainer.step}", err=True)

    def show(row: dict) -> None:
        typer.echo(f"step {row['step']}: reward {row['reward_mean']:.3f} kl {row['kl']:.4f} "
                   f"length {row['response_length']:.1f} ({row['step_seconds']:.1f}s)", err=True)

    try:
        trainer.train(on_step=show)
    except WeightSyncError as e:  # one line, never a run that goes on sampling the old weights
        typer.echo(f"error: step {trainer.step}: {e}", err=True)
        raise typer.Exit(1) from None
    finally:
        trainer.close()
    typer.echo(f"done: {cfg.steps} steps; metrics in {Path(cfg.out_dir) / 'metrics.jsonl'}; "
               f"{checkpoint_summary(cfg.out_dir)}")
