"""A TRL ``GRPOTrainer(reward_funcs=...)`` reward function built from any rewardkit scorer (tested with TRL 1.16).

TRL calls ``f(prompts=, completions=, completion_ids=, **dataset_columns, trainer_state=, log_extra=,
log_metric=)`` once per generation batch and expects one ``float | None`` per completion (None becomes
NaN: TRL leaves it out). Group-relative scorers need a prompt's completions together, and TRL may split
one prompt's ``num_generations`` completions across processes. So under several processes the function
gathers every process's rows, scores them once on the main process (one scorer call for the whole
batch) and hands each process its own slice back.

Groups are what TRL's advantages use: contiguous blocks of ``num_generations`` completions in the batch
(TRL's ``RepeatSampler`` repeats each prompt ``num_generations`` times in a row; ``rewards.view(-1,
num_generations)``), not the prompt text, so two identical dataset rows in one batch stay two groups.
A group-relative scorer therefore needs ``num_generations``; a per-response scorer without it groups
rows by prompt (its rewards do not depend on the grouping).

    from rewardkit.integrations.trl import scorer_reward_func
    trainer = GRPOTrainer(model=..., reward_funcs=[scorer_reward_func("verifier")], train_dataset=ds, args=...)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rewardkit.integrations.common import load_scorer, score_rows
from rewardkit.scoring import Scorer, is_group_relative
from rewardkit.types import Cost


def _text(x: Any) -> str:
    """A prompt or completion as text: plain strings as is; chat messages as their last message's content."""
    if isinstance(x, str):
        return x
    if isinstance(x, list) and x and isinstance(x[-1], dict) and "content" in x[-1]:
        return str(x[-1]["content"])
    raise TypeError(f"expected a string or a list of chat messages, got {type(x).__name__}")


def _key(x: Any) -> str:
    return x if isinstance(x, str) else json.dumps(x, sort_keys=True)


def _gathered(rows: list[Any], score: Callable[[list[Any]], list[Any]]) -> list[Any]:
    """Score ``rows`` of every process together: gather, score on the main process, scatter slices back."""
    from accelerate import PartialState
    from accelerate.utils import broadcast_object_list, gather_object

    state = PartialState()
    if state.num_processes == 1:
        return score(rows)
    sizes = gather_object([len(rows)])
    everything = gather_object(rows)
    box = [score(everything) if state.is_main_process else None]
    broadcast_object_list(box, from_process=0)
    start = sum(sizes[: state.process_index])
    return box[0][start:start + len(rows)]


def scorer_reward_func(scorer: str | Scorer, *, num_generations: int | None = None,
                       reference_column: str = "answer", expert_column: str = "solution",
                       name: str | None = None, **options: Any) -> Callable[..., list[float | None]]:
    """A TRL reward function scoring whole groups with ``scorer`` (a name, ``module:Class`` or a Scorer).

    The dataset's ``reference_column`` (default ``answer``) becomes each group's reference and
    ``expert_column`` (``solution``) its expert answer, when present. ``num_generations`` (TRL's) groups
    the batch as TRL does: contiguous blocks of that many completions (required by group-relative scorers).
    Masked responses get None. Metrics go to ``log_metric`` under ``rewardkit/<function name>/...``, so
    several rewardkit functions in one run are logged apart.
    """
    sc = load_scorer(scorer, options or None)
    fname = name or f"rewardkit_{getattr(sc, 'name', type(sc).__name__)}".replace("-", "_")
    if num_generations is None and is_group_relative(sc):
        raise ValueError(f"scorer {getattr(sc, 'name', fname)!r} rewards a completion against its group: pass "
                         "num_generations= (GRPOConfig's), so groups are TRL's blocks of num_generations completions")
    if num_generations is not None and (isinstance(num_generations, bool) or num_generations < 1):
        raise ValueError(f"num_generations must be an integer >= 1, got {num_generations!r}")

    def score(rows: list[tuple[str, str, str, str | None, str | None]]) -> list[tuple[float | None, Cost]]:
        if num_generations is None:
            keys: list[Any] = [r[0] for r in rows]
        else:
            keys = _blocks(rows, num_generations)
        rewards, scores, idx = score_rows(sc, [r[1] for r in rows], [r[2] for r in rows], keys,
                                          [r[3] for r in rows], [r[4] for r in rows])
        cost = [Cost()] * len(rows)
        for g, s in zip(idx, scores, strict=True):
            for i in g:
                cost[i] = s.cost
        return list(zip(rewards, cost, strict=True))

    def reward_func(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        refs = kwargs.get(reference_column) or [None] * len(prompts)
        experts = kwargs.get(expert_column) or [None] * len(prompts)
        bad = next((i for i, r in enumerate(refs) if isinstance(r, (list, tuple))), None)
        if bad is not None:  # str() of a list would be a reference no answer equals
            raise ValueError(f"rewardkit reward function: dataset column {reference_column!r} holds a list of "
                             f"{len(refs[bad])} references (row {bad}); rewardkit takes one reference answer per "
                             "row: keep one answer in that column (or name another with reference_column=)")
        rows = [(_key(p) + "\x00" + str(r), _text(p), _text(c), None if r is None else str(r),
                 None if e is None else str(e)) for p, c, r, e in zip(prompts, completions, refs, experts, strict=True)]
        out = _gathered(rows, score)
        log_metric = kwargs.get("log_metric")
        if log_metric is not None and out:
            valid = [r for r, _ in out if r is not None]
            log_metric(f"rewardkit/{fname}/masked_fraction", 1.0 - len(valid) / len(out))
            seen = {id(c): c for _, c in out}
            log_metric(f"rewardkit/{fname}/judge_calls", float(sum(c.judge_calls for c in seen.values())))
        return [r for r, _ in out]

    reward_func.__name__ = fname
    return reward_func


def _blocks(rows: list[tuple[str, ...]], n: int) -> list[int]:
    """Each row's group as TRL forms it: its block of ``n`` contiguous rows; a clear error where the batch
    is not whole blocks of one prompt each."""
    if len(rows) % n:
        raise ValueError(f"rewardkit reward function: {len(rows)} completions in the batch where TRL's "
                         f"num_generations is {n}: not whole groups (is num_generations= the GRPOConfig's?)")
    for start in range(0, len(rows), n):
        if any(r[0] != rows[start][0] for r in rows[start:start + n]):
            raise ValueError(f"rewardkit reward function: completions {start}-{start + n - 1} (one group of "
                             f"num_generations={n}) have different prompts or references: is num_generations= "
                             "the GRPOConfig's?")
    return [i // n for i in range(len(rows))]
