"""``rewardkit train``: the minimal GRPO trainer over any scorer (options come from TrainConfig's fields)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Optional

import typer
from rewardkit.cli.common import BatchTokens, Device, DType, Threads, judge_spec, parse_pairs


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


def build_mode(name: str, options: dict[str, str]):
    """A training mode from its name and ``KEY=VALUE`` options (the mode's own, else its scorer's)."""
    from rewardkit.grpo.modes import build_mode as build

    try:
        return build(name, options)
    except (TypeError, ValueError) as e:
        raise typer.BadParameter(str(e), param_hint="--training-mode" if "unknown mode" in str(e) else "--training-option") from None


def _settings_help() -> str:
    from rewardkit.grpo import TrainConfig

    return "Settings (--set KEY=VALUE):\n" + "\n".join(
        f"  {f.name} [{f.default!r}]: {f.metadata['help']}" for f in dataclasses.fields(TrainConfig))


def train(
    prompts: Annotated[Optional[Path], typer.Argument(help="JSONL prompts: prompt/problem/question, optional answer and solution.")] = None,
    scorer: Annotated[str, typer.Option("--scorer", "-s", help="Scorer name (see `rewardkit scorers`) or module:Class.")] = "verifier",
    option: Annotated[Optional[list[str]], typer.Option("--option", "-o", help="Scorer option KEY=VALUE (repeatable).")] = None,
    judge: Annotated[Optional[str], typer.Option(help="Judge backend spec for judge-based scorers.")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="Run folder (checkpoints, metrics.jsonl); re-run to resume.")] = None,
    steps: Annotated[Optional[int], typer.Option(help="Total optimizer steps.")] = None,
    setting: Annotated[Optional[list[str]], typer.Option("--set", "-t", help="Trainer setting KEY=VALUE (repeatable; see --help-settings).")] = None,
    limit: Annotated[Optional[int], typer.Option(help="Use only the first N prompts.")] = None,
    training_mode: Annotated[Optional[str], typer.Option(help="Training mode: raro (shared-LLM critic) or gar (joint discriminator); supplies the scorer. (A scorer's verdict mode is its option -o mode=...)")] = None,
    training_option: Annotated[Optional[list[str]], typer.Option("--training-option", "-m", help="Training-mode option KEY=VALUE (e.g. lambda_pol=0.5).")] = None,
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

    cfg = train_config(parse_pairs(setting, "--set"), out_dir=str(out) if out else None, steps=steps)
    modes = [build_mode(training_mode, parse_pairs(training_option, "--training-option"))] if training_mode else []
    judge = judge_spec(judge, device, dtype, batch_tokens, threads)
    sc = None if training_mode else load_scorer(scorer, parse_pairs(option, "--option"), judge)
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
