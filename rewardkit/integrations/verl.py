"""A verl 0.9.1 reward-loop manager that scores whole groups (rows sharing ``uid``) with any rewardkit scorer.

verl 0.9's trainer computes rewards only through its reward loop (``verl.experimental.reward_loop``):
``RewardLoopWorker`` Ray actors (``reward.num_workers``, default 8) call ``run_single`` once per row. With no
reward model, the agent loop sends each finished sample to ``random.choice(reward_loop_workers)``, so one
``uid``'s rows land on different workers. ``RewardkitLoopManager`` therefore forwards every row to ONE
group assembler per job (a named Ray actor, ``rewardkit.integrations.assembler``), which holds rows until
``group_size`` (default ``actor_rollout_ref.rollout.n``) of a ``uid`` arrived, scores that group once and
answers every row, whichever worker it came through. Outside Ray (a plain event loop) the manager
assembles in its own process. A group still short after ``group_timeout`` seconds is scored as it stands
and flagged ``rewardkit_partial = 1``.

verl's reward tensor has no mask: a masked response (non-ok status) gets ``masked_reward`` (0.0 unless
set) and is flagged ``rewardkit_ok = 0`` in ``reward_extra_info``, so it is never silently a 0.

The scorer comes from ``$REWARDKIT_SCORER`` (a name or ``module:Class``) and ``$REWARDKIT_SCORER_OPTIONS``
(JSON), or from Python: ``reward_manager_for(scorer)`` returns a manager class bound to an instance.
``compute_score`` is the plain ``custom_reward_function`` contract for per-response scorers, and
``compute_score_async`` its coroutine form (verl's reward loop awaits a coroutine function instead of running it
in a thread; concurrent rows are scored together in one scorer call, in a worker thread, so a judge batches and
the loop stays free). Both take the scorer from verl's ``custom_reward_function.reward_kwargs`` (``scorer``,
``judge``, ``options``, ``masked_reward``), else from the environment. A ``ground_truth`` list (a numpy array
from a parquet list column) is several references, any of which is right.
"""

from __future__ import annotations

import json
import math
import os
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np

from rewardkit.integrations.assembler import GroupAssembler, say_once, shared_assembler
from rewardkit.integrations.common import GroupGatherer, load_scorer
from rewardkit.scoring import Scorer, is_group_relative
from rewardkit.types import Group, GroupScore, Reference, reference_value

_SCORERS: dict[str, Scorer] = {}


def env_scorer_spec() -> tuple[str, dict[str, Any]]:
    """``$REWARDKIT_SCORER`` (a name or module:Class) and its options (``$REWARDKIT_SCORER_OPTIONS``, JSON)."""
    name = os.environ.get("REWARDKIT_SCORER")
    if not name:
        raise RuntimeError("rewardkit verl adapter: set REWARDKIT_SCORER (a scorer name or module:Class), "
                           "or build the manager with reward_manager_for(scorer)")
    return name, json.loads(os.environ.get("REWARDKIT_SCORER_OPTIONS", "{}"))


def env_scorer() -> Scorer:
    """The scorer named by ``$REWARDKIT_SCORER`` (options: ``$REWARDKIT_SCORER_OPTIONS`` JSON), built once."""
    name, options = env_scorer_spec()
    key = f"{name}|{json.dumps(options, sort_keys=True)}"
    if key not in _SCORERS:
        _SCORERS[key] = load_scorer(name, options)
    return _SCORERS[key]


def _ground_truth(item_nt: dict[str, Any]) -> Reference | None:
    """``reward_model.ground_truth`` as text; a ``reward_model`` that is not verl's dict is an error, not an abstain."""
    rm = item_nt.get("reward_model")
    if rm is not None and not isinstance(rm, dict):
        raise ValueError(f"rewardkit verl adapter: reward_model must be a dict with 'ground_truth' (verl's shape), "
                         f"got {type(rm).__name__} {str(rm)[:60]!r}")
    return _reference(rm.get("ground_truth") if isinstance(rm, dict) else None)


def _reference(gt: Any) -> Reference | None:
    """verl's ``ground_truth`` as the data model's reference: text, a number as its text, or a list (a parquet
    list column arrives as a numpy array) as several references of which any is right."""
    if isinstance(gt, np.ndarray):
        gt = gt.tolist()
    if isinstance(gt, (list, tuple)) and not gt:
        return None
    return reference_value(gt, "reward_model.ground_truth")


def _decode_rows(data: Any, tokenizer: Any) -> tuple[list[str], list[str], list[int]]:
    """Prompt texts, response texts and each row's last valid response position from a DataProto."""
    prompts, responses = data.batch["prompts"], data.batch["responses"]
    p_len = prompts.shape[-1]
    attn = data.batch["attention_mask"]
    p_txt, r_txt, last = [], [], []
    for i in range(len(data)):
        n_p = int(attn[i, :p_len].sum())
        n_r = int(attn[i, p_len:].sum())
        p_txt.append(tokenizer.decode(prompts[i, p_len - n_p:], skip_special_tokens=True))
        r_txt.append(tokenizer.decode(responses[i, :n_r], skip_special_tokens=True))
        last.append(max(n_r - 1, 0))
    return p_txt, r_txt, last


try:  # verl is optional: without it the manager still works standalone (its contract is tested either way)
    from verl.experimental.reward_loop.reward_manager import register as _loop_register
    from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase as _LoopBase
except ImportError:
    _LoopBase, _loop_register = object, None  # type: ignore[assignment, misc]


def _register(register: Any, cls: type) -> None:
    """Register under "rewardkit" unless a copy of this module did already (verl's importlib source
    executes this file again under another module name)."""
    if register is not None:
        try:
            register("rewardkit")(cls)
        except ValueError:
            pass


class RewardkitLoopManager(_LoopBase):  # type: ignore[misc, valid-type]
    """verl 0.9 reward-loop manager: ``run_single`` per row; rows of a ``uid`` are scored together, once.

    ``assembler``: ``"auto"`` (the job's shared Ray actor when running under Ray, else this process),
    ``"ray"`` or ``"local"``.
    """

    scorer: Scorer | None = None

    def __init__(self, config: Any, tokenizer: Any, compute_score: Any = None, group_size: int | None = None,
                 group_timeout: float = 300.0, masked_reward: float = 0.0, assembler: str = "auto", **kwargs: Any):
        if _LoopBase is not object:
            super().__init__(config, tokenizer, compute_score)
        self.tokenizer, self.masked_reward = tokenizer, masked_reward
        self.group_size, self.group_timeout = group_size or _rollout_n(config), group_timeout
        if assembler not in ("auto", "ray", "local"):
            raise ValueError(f"option 'assembler': expected auto, ray or local, got {assembler!r}")
        self._mode, self._add = assembler, None
        self._warning = _validation_warning(config, self.group_size)  # said by the job's assembler, once

    def _adder(self) -> Any:
        """``add(key, prompt, response, reference)`` -> awaitable RowScore, on the shared or a local assembler."""
        if self._add is None:
            bound = type(self).scorer
            scorer, options = (bound, None) if bound is not None else env_scorer_spec()
            if self._mode == "ray" or (self._mode == "auto" and _ray_running()):
                actor = shared_assembler(scorer, self.group_size, self.group_timeout, options=options)
                self._add = actor.add.remote
                if self._warning:  # every worker builds a manager: the one assembler logs the warning once
                    actor.say_once.remote("validation group size", self._warning)
            else:
                self._add = GroupAssembler(scorer, self.group_size, self.group_timeout, options).add
                if self._warning:
                    say_once("validation group size", self._warning)
        return self._add

    async def run_single(self, data: Any) -> dict[str, Any]:
        p_txt, r_txt, _ = _decode_rows(data[-1:], self.tokenizer)
        nt = data[-1].non_tensor_batch
        row = await self._adder()(str(nt["uid"]), p_txt[0], r_txt[0], _ground_truth(nt))
        ok = row.reward is not None
        return {"reward_score": row.reward if ok else self.masked_reward,
                "reward_extra_info": {"rewardkit_ok": float(ok), "rewardkit_partial": float(row.partial),
                                      "rewardkit_group_size": float(row.group_size)}}


def _ray_running() -> bool:
    try:
        import ray
    except ImportError:
        return False
    return ray.is_initialized()


def _validation_warning(config: Any, n: int) -> str | None:
    """verl's validation sends ``val_kwargs.n`` rows per uid, indistinguishable from training rows here."""
    try:
        val_n = int(config.actor_rollout_ref.rollout.val_kwargs.n)
    except (AttributeError, KeyError, TypeError):
        return None
    if val_n == n:
        return None
    return (f"rewardkit verl adapter: validation sends actor_rollout_ref.rollout.val_kwargs.n={val_n} rows per uid "
            f"but groups are {n} rows, so each validation group waits group_timeout and is scored short "
            f"(rewardkit_partial=1); set val_kwargs.n={n}, or validate without the reward loop")


def _rollout_n(config: Any) -> int:
    try:
        return int(config.actor_rollout_ref.rollout.n)
    except (AttributeError, KeyError, TypeError):
        raise ValueError("RewardkitLoopManager: pass group_size or set actor_rollout_ref.rollout.n") from None


_register(_loop_register, RewardkitLoopManager)


def reward_manager_for(scorer: Scorer | str, **options: Any) -> type:
    """A manager class bound to ``scorer`` (verl instantiates classes; register it under your own name).

    Under Ray the instance is pickled to the job's group assembler, which does all the scoring.
    """
    sc = load_scorer(scorer, options or None)
    name = f"RewardkitLoopManager_{getattr(sc, 'name', 'custom')}".replace("-", "_")
    return type(name, (RewardkitLoopManager,), {"scorer": sc})


#: what verl's reward managers add to every compute_score call (reward-model routing), not rewardkit's business
VERL_CALL_KWARGS = ("reward_router_address", "reward_model_tokenizer")
REWARD_KWARGS = ("scorer", "judge", "options", "masked_reward")


def _call_scorer(kwargs: dict[str, Any]) -> tuple[Scorer, float]:
    """The scorer and masked reward a compute_score call asks for: verl's ``reward_kwargs`` (``scorer``, ``judge``,
    ``options``, ``masked_reward``), else ``$REWARDKIT_SCORER``; built once per configuration."""
    extra = sorted(set(kwargs) - set(REWARD_KWARGS) - set(VERL_CALL_KWARGS))
    if extra:
        raise TypeError(f"rewardkit compute_score: unknown reward_kwargs {extra}; it takes {', '.join(REWARD_KWARGS)} "
                        "(custom_reward_function.reward_kwargs.scorer=verifier, ...options.timeout=5)")
    masked = kwargs.get("masked_reward")
    masked = float(os.environ.get("REWARDKIT_MASKED_REWARD", 0.0) if masked is None else masked)
    name = kwargs.get("scorer")
    if name is None:
        if kwargs.get("options") or kwargs.get("judge"):
            raise TypeError("rewardkit compute_score: reward_kwargs give options or judge but no scorer")
        sc = env_scorer()
    else:
        options = _plain(kwargs.get("options") or {})
        if not isinstance(options, dict):
            raise TypeError(f"rewardkit compute_score: reward_kwargs.options must be a mapping, got {options!r}")
        judge = kwargs.get("judge")
        key = json.dumps([name, options, judge], sort_keys=True, default=str)
        if key not in _SCORERS:
            _SCORERS[key] = load_scorer(str(name), options, judge)
        sc = _SCORERS[key]
    if is_group_relative(sc):
        raise ValueError(f"scorer {sc.name!r} rewards a response relative to its group; compute_score sees one "
                         "response at a time: use the reward manager RewardkitLoopManager instead")
    return sc, masked


def _plain(x: Any) -> Any:
    """omegaconf's DictConfig / ListConfig (verl's reward_kwargs) as plain dicts and lists."""
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)) or type(x).__name__ == "ListConfig":
        return [_plain(v) for v in x]
    return x


def _one(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None) -> Group:
    prompt = str((extra_info or {}).get("question") or (extra_info or {}).get("prompt") or "")
    return Group(f"{data_source}", prompt, [solution_str], reference=_reference(ground_truth))


def _result(s: GroupScore, masked: float) -> dict[str, Any]:
    v = float(s.rewards[0])
    ok = not math.isnan(v)
    return {"score": v if ok else masked, "rewardkit_ok": float(ok)}


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None,
                  **kwargs: Any) -> dict[str, Any]:
    """verl's ``custom_reward_function`` contract for per-response scorers.

    The scorer comes from ``reward_kwargs`` (``scorer``, ``judge``, ``options``, ``masked_reward``) else
    ``$REWARDKIT_SCORER``. Returns ``{"score", "rewardkit_ok"}``; a masked response scores ``masked_reward``
    (``$REWARDKIT_MASKED_REWARD``, 0.0) with ``rewardkit_ok`` 0. Group-relative scorers are refused: use the
    reward manager for those.
    """
    sc, masked = _call_scorer(kwargs)
    (s,) = sc.score([_one(data_source, solution_str, ground_truth, extra_info)])
    return _result(s, masked)


_LOOP_GATHERERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # event loop -> {id(scorer): gatherer}


async def compute_score_async(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None,
                              **kwargs: Any) -> dict[str, Any]:
    """``compute_score`` as a coroutine (set ``custom_reward_function.name=compute_score_async``): verl's reward
    loop awaits it per sample; samples awaiting at once are scored in ONE scorer call in a worker thread, so a
    judge batches them and the event loop (verl's other rows and reward functions) is never blocked."""
    import asyncio

    sc, masked = _call_scorer(kwargs)
    per_loop = _LOOP_GATHERERS.setdefault(asyncio.get_running_loop(), {})
    gatherer = per_loop.get(id(sc))
    if gatherer is None:
        gatherer = per_loop[id(sc)] = GroupGatherer(sc, 1)
    (s,) = await gatherer.score([_one(data_source, solution_str, ground_truth, extra_info)])
    return _result(s, masked)


__all__ = ["RewardkitLoopManager", "compute_score", "compute_score_async", "env_scorer", "env_scorer_spec",
           "reward_manager_for"]
