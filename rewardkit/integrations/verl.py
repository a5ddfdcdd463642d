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
``compute_score`` is the plain ``custom_reward_function`` contract for per-response scorers.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from rewardkit.integrations.assembler import GroupAssembler, say_once, shared_assembler
from rewardkit.integrations.common import load_scorer
from rewardkit.scoring import Scorer, is_group_relative
from rewardkit.types import Group

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


def _ground_truth(item_nt: dict[str, Any]) -> str | None:
    """``reward_model.ground_truth`` as text; a ``reward_model`` that is not verl's dict is an error, not an abstain."""
    rm = item_nt.get("reward_model")
    if rm is not None and not isinstance(rm, dict):
        raise ValueError(f"rewardkit verl adapter: reward_model must be a dict with 'ground_truth' (verl's shape), "
                         f"got {type(rm).__name__} {str(rm)[:60]!r}")
    return _reference(rm.get("ground_truth") if isinstance(rm, dict) else None)


def _reference(gt: Any) -> str | None:
    """One reference answer from verl's ``ground_truth``. A list of references (a parquet list column arrives as
    a numpy array) is not read as the text of a list: the row gets no reference, so a scorer that needs one
    masks it (``rewardkit_ok = 0``), and the log says why, once."""
    if isinstance(gt, (list, tuple, np.ndarray)):
        say_once(f"rewardkit verl adapter: reward_model.ground_truth is a list of {len(gt)} references "
                 f"({str(list(gt))[:60]}); rewardkit takes one reference answer per row, so these rows have none "
                 "(a scorer that needs one masks them: rewardkit_ok = 0): store one answer in ground_truth")
        return None
    return None if gt is None else str(gt)


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
                    actor.say_once.remote(self._warning)
            else:
                self._add = GroupAssembler(scorer, self.group_size, self.group_timeout, options).add
                if self._warning:
                    say_once(self._warning)
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


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None,
                  **kwargs: Any) -> dict[str, Any]:
    """verl's ``custom_reward_function`` contract for per-response scorers (``$REWARDKIT_SCORER``).

    Returns ``{"score", "rewardkit_ok"}``; a masked response scores ``$REWARDKIT_MASKED_REWARD`` (0.0) with
    ``rewardkit_ok`` 0. Group-relative scorers are refused: use the reward manager for those.
    """
    sc = env_scorer()
    if is_group_relative(sc):
        raise ValueError(f"scorer {sc.name!r} rewards a response relative to its group; compute_score sees one "
                         "response at a time: use the reward manager RewardkitLoopManager instead")
    prompt = str((extra_info or {}).get("question") or (extra_info or {}).get("prompt") or "")
    (s,) = sc.score([Group(f"{data_source}", prompt, [solution_str], reference=_reference(ground_truth))])
    v = float(s.rewards[0])
    ok = not math.isnan(v)
    return {"score": v if ok else float(os.environ.get("REWARDKIT_MASKED_REWARD", 0.0)), "rewardkit_ok": float(ok)}


__all__ = ["RewardkitLoopManager", "compute_score", "env_scorer", "env_scorer_spec", "reward_manager_for"]
