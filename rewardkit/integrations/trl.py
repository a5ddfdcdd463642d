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
The block size is the one TRL uses for the batch at hand: called by a GRPOTrainer (its ``log_metric`` is
the trainer's method) the function reads the trainer's ``num_generations`` while training and
``num_generations_eval`` while evaluating; called alone, ``num_generations=``. A group-relative scorer
therefore needs ``num_generations`` (GRPOConfig's); a per-response scorer called alone groups rows by prompt
(its rewards do not depend on the grouping).

A dataset column of several references (a list per row) means any of them is right. ``async_scorer_reward_func``
is the same function as a coroutine: TRL gathers async reward functions with ``asyncio.gather``, so a slow
judge scores in a worker thread while the trainer's other async reward functions run.

    from rewardkit.integrations.trl import scorer_reward_func
    trainer = GRPOTrainer(model=..., reward_funcs=[scorer_reward_func("verifier")], train_dataset=ds, args=...)
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable
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
    return x if isinstance(x, str) else json.dumps(x, sort_keys=True, default=str)


def _ref(x: Any) -> Any:
    """A reference cell as the data model takes it: lists (numpy arrays from Arrow columns too) stay lists."""
    return x.tolist() if hasattr(x, "tolist") and not isinstance(x, (str, bytes)) else x


def group_size(log_metric: Any, num_generations: int | None) -> int | None:
    """The completions per group TRL uses for the batch at hand: the calling GRPOTrainer's ``num_generations``
    while training, ``num_generations_eval`` while evaluating (TRL passes its bound ``_log_metric``, so the
    trainer is known); ``num_generations`` when called outside a trainer. A given ``num_generations`` that
    differs from the trainer's is an error, not a silent choice."""
    trainer = getattr(log_metric, "__self__", None)
    train_n = getattr(trainer, "num_generations", None)
    if not isinstance(train_n, int):
        return num_generations
    if num_generations is not None and num_generations != train_n:
        raise ValueError(f"rewardkit reward function: num_generations={num_generations} but the GRPOTrainer's is "
                         f"{train_n}: pass GRPOConfig's num_generations (or leave it out: the trainer's is used)")
    training = getattr(getattr(trainer, "model", None), "training", True)
    return train_n if training else int(getattr(trainer, "num_generations_eval", None) or train_n)


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

    The dataset's ``reference_column`` (default ``answer``) becomes each group's reference (a list: any of
    them is right) and ``expert_column`` (``solution``) its expert answer, when present. Groups are TRL's:
    contiguous blocks of the trainer's ``num_generations`` (``num_generations_eval`` in evaluation; see
    ``group_size``). Masked responses get None. The function is named ``name`` (default
    ``rewardkit_<scorer>``: TRL logs ``rewards/<that>/mean``) and its metrics go to ``log_metric`` as
    ``rewardkit/<name or scorer>/...``, so several rewardkit functions in one run are logged apart.
    """
    sc = load_scorer(scorer, options or None)
    short = (name or str(getattr(sc, "name", type(sc).__name__))).replace("-", "_")
    fname = name or f"rewardkit_{short}"
    if num_generations is not None and (isinstance(num_generations, bool) or num_generations < 1):
        raise ValueError(f"num_generations must be an integer >= 1, got {num_generations!r}")

    def score(rows: list[tuple[str, str, str, Any, str | None]], n: int | None) -> list[tuple[float | None, Cost]]:
        keys: list[Any] = [r[0] for r in rows] if n is None else _blocks(rows, n)
        rewards, scores, idx = score_rows(sc, [r[1] for r in rows], [r[2] for r in rows], keys,
                                          [r[3] for r in rows], [r[4] for r in rows])
        cost = [Cost()] * len(rows)
        for g, s in zip(idx, scores, strict=True):
            for i in g:
                cost[i] = s.cost
        return list(zip(rewards, cost, strict=True))

    def reward_func(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        refs = kwargs.get(reference_column)
        refs = [None] * len(prompts) if refs is None else [_ref(r) for r in refs]
        experts = kwargs.get(expert_column)
        experts = [None] * len(prompts) if experts is None else experts
        log_metric = kwargs.get("log_metric")
        n = group_size(log_metric, num_generations)
        if n is None and is_group_relative(sc):  # only reachable without a trainer
            raise ValueError(f"scorer {short!r} rewards a completion against its group: pass num_generations= "
                             "(GRPOConfig's), so groups are TRL's blocks of num_generations completions")
        rows = [(_key(p) + "\x00" + _key(r), _text(p), _text(c), r, None if e is None else str(e))
                for p, c, r, e in zip(prompts, completions, refs, experts, strict=True)]
        out = _gathered(rows, functools.partial(score, n=n))
        if log_metric is not None and out:
            valid = [r for r, _ in out if r is not None]
            log_metric(f"rewardkit/{short}/masked_fraction", 1.0 - len(valid) / len(out))
            seen = {id(c): c for _, c in out}
            log_metric(f"rewardkit/{short}/judge_calls", float(sum(c.judge_calls for c in seen.values())))
        return [r for r, _ in out]

    reward_func.__name__ = fname
    return reward_func


def async_scorer_reward_func(scorer: str | Scorer, **kwargs: Any) -> Callable[..., Awaitable[list[float | None]]]:
    """``scorer_reward_func`` as a coroutine function (same arguments): TRL awaits async reward functions
    together (``asyncio.gather`` on its own event loop), and this one scores in a worker thread, so a judge
    scorer leaves that loop free for the trainer's other async reward functions."""
    sync = scorer_reward_func(scorer, **kwargs)

    async def reward_func(prompts: list[Any], completions: list[Any], **kw: Any) -> list[float | None]:
        return await asyncio.to_thread(sync, prompts, completions, **kw)

    reward_func.__name__ = sync.__name__
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
