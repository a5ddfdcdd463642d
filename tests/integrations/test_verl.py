"""The verl adapter on verl 0.9.1's own code: DataProto, the reward-loop registry and workers, the agent loop's dispatch.

verl cannot be installed with its dependencies next to this project (it pins transformers < 5.11); it
imports with ``pip install --no-deps verl==0.9.1 tensordict==0.10.0 codetiming "pyvers<0.2" "omegaconf<2.4"
hydra-core antlr4-python3-runtime==4.9.3 orjson cachetools fastapi opentelemetry-api`` (docs/integrations.md).
Without it these tests skip, saying so.
"""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from rewardkit.scoring import BaseScorer
from rewardkit.testing import import_or_skip
from rewardkit.types import GroupScore, Status

verl = import_or_skip("verl", "scripts/frameworks_env.sh builds an environment with verl 0.9.1 (this module's docstring)")
torch = pytest.importorskip("torch")


class Recorder(BaseScorer):
    """Reward = rank of the response's length within its group / N; 'FAIL' responses error. Records calls."""

    name = "recorder"

    def __init__(self):
        self.calls: list[list[tuple[str, list[str], str | None]]] = []

    def _score(self, groups):
        self.calls.append([(g.prompt, list(g.responses), g.reference) for g in groups])
        out = []
        for g in groups:
            r = np.argsort(np.argsort([len(x) for x in g.responses])) / len(g)
            st = [Status.ERROR if "FAIL" in x else Status.OK for x in g.responses]
            out.append(GroupScore(g.id, r.astype(float), st))
        return out


class CharTokenizer:
    """A byte-level stand-in tokenizer (id 0 = padding) so rows decode exactly."""

    def encode(self, s):
        return [ord(c) for c in s]

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(int(i)) for i in ids if int(i) != 0)


def _batch(rows, tok):
    """A verl DataProto laid out as rollouts are: left-padded prompts, right-padded responses."""
    from verl import DataProto

    P = max(len(p) for p, *_ in rows)
    R = max(len(r) for _, r, *_ in rows)
    prompts = torch.zeros(len(rows), P, dtype=torch.long)
    responses = torch.zeros(len(rows), R, dtype=torch.long)
    attn = torch.zeros(len(rows), P + R, dtype=torch.long)
    for i, (p, r, *_) in enumerate(rows):
        prompts[i, P - len(p):] = torch.tensor(tok.encode(p))
        attn[i, P - len(p):P] = 1
        responses[i, :len(r)] = torch.tensor(tok.encode(r))
        attn[i, P:P + len(r)] = 1
    nt = {"uid": np.array([u for *_, u, _ in rows], dtype=object),
          "reward_model": np.array([{"ground_truth": g} for *_, g in rows], dtype=object),
          "data_source": np.array(["test"] * len(rows), dtype=object)}
    return DataProto.from_dict(tensors={"prompts": prompts, "responses": responses, "attention_mask": attn},
                               non_tensors=nt)


ROWS = [("Q1?", "aaaa", "u1", "4"), ("Q2?", "b", "u2", "6"), ("Q1?", "aa", "u1", "4"), ("Q2?", "bbFAIL", "u2", "6")]


def test_only_the_reward_loop_manager_is_registered_where_verl_091_looks():
    # verl 0.9.1's trainer resolves reward managers from the reward-loop registry only
    # (verl.trainer.ppo.reward.resolve_reward_manager_cls); the old verl.workers.reward_manager one is dead
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls
    from verl.trainer.ppo.reward import resolve_reward_manager_cls
    from verl.workers.reward_manager import registry as legacy

    from rewardkit.integrations import verl as rv

    assert get_reward_manager_cls("rewardkit") is rv.RewardkitLoopManager
    assert "rewardkit" not in legacy.REWARD_MANAGER_REGISTRY and not hasattr(rv, "RewardkitRewardManager")
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"reward": {"reward_manager": {"source": "importlib", "name": "RewardkitLoopManager",
                                                          "module": {"path": "pkg://rewardkit.integrations.verl"}}}})
    assert resolve_reward_manager_cls(cfg).__name__ == "RewardkitLoopManager"  # the documented path


def test_reward_loop_manager_gathers_single_rows_into_uid_groups():
    from omegaconf import OmegaConf
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls
    from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

    from rewardkit.integrations.verl import RewardkitLoopManager, reward_manager_for

    assert get_reward_manager_cls("rewardkit") is RewardkitLoopManager
    sc = Recorder()
    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {"n": 2}}})
    mgr = reward_manager_for(sc)(cfg, CharTokenizer(), None, assembler="local")
    data = _batch(ROWS, CharTokenizer())

    async def run():  # what verl's RewardLoopWorker.compute_score_batch does: one task per row
        return await asyncio.gather(*(mgr.run_single(data[i:i + 1]) for i in range(len(data))))

    outs = asyncio.run(run())
    assert sorted(g for c in sc.calls for g in c) == [("Q1?", ["aaaa", "aa"], "4"), ("Q2?", ["b", "bbFAIL"], "6")]
    assert [o["reward_score"] for o in outs] == [0.5, 0.0, 0.0, 0.0]
    assert [o["reward_extra_info"]["rewardkit_ok"] for o in outs] == [1.0, 1.0, 1.0, 0.0]
    rm = RewardManagerBase.assemble_rm_scores(data, [o["reward_score"] for o in outs])  # verl's own assembly
    assert float(rm[0, 3]) == 0.5


def test_validation_groups_of_another_size_are_announced_once_not_by_every_worker(caplog, monkeypatch):
    from omegaconf import OmegaConf

    from rewardkit.integrations import assembler
    from rewardkit.integrations.verl import reward_manager_for

    monkeypatch.setattr(assembler, "_SAID", set(), raising=False)  # said-once messages of this test only
    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {"n": 8, "val_kwargs": {"n": 1}}}})
    data = _batch(ROWS, CharTokenizer())
    with caplog.at_level("WARNING"):
        for _ in range(3):  # verl builds one manager per reward-loop worker (8 by default)
            mgr = reward_manager_for(Recorder())(cfg, CharTokenizer(), None, group_size=2, assembler="local")

            async def run(mgr=mgr):
                return await asyncio.gather(*(mgr.run_single(data[i:i + 1]) for i in range(len(data))))

            asyncio.run(run())
    lines = [r.getMessage() for r in caplog.records if "val_kwargs.n=1" in r.getMessage()]
    assert len(lines) == 1 and "set val_kwargs.n=2" in lines[0]


def test_a_list_ground_truth_means_any_of_them_is_right(monkeypatch):
    # before: the row had no reference (rewardkit_ok 0) and a warning per distinct list; now one rule everywhere
    from omegaconf import OmegaConf

    from rewardkit.integrations import verl as rv

    monkeypatch.setenv("REWARDKIT_SCORER", "verifier")
    monkeypatch.delenv("REWARDKIT_SCORER_OPTIONS", raising=False)
    assert rv.compute_score("math", r"so \boxed{four}", ["4", "four"]) == {"score": 1.0, "rewardkit_ok": 1.0}
    assert rv.compute_score("math", r"so \boxed{4}", np.array(["4", "four"], dtype=object))["score"] == 1.0
    assert rv.compute_score("math", r"so \boxed{5}", np.array(["4", "four"], dtype=object)) == {"score": 0.0,
                                                                                             "rewardkit_ok": 1.0}
    data = _batch(ROWS, CharTokenizer())
    data.non_tensor_batch["reward_model"] = np.array([{"ground_truth": np.array(["4", "four"], dtype=object)}] * 4,
                                                     dtype=object)
    sc = Recorder()
    mgr = rv.reward_manager_for(sc)(OmegaConf.create({"actor_rollout_ref": {"rollout": {"n": 2}}}), CharTokenizer(),
                                    None, assembler="local")

    async def run():
        return await asyncio.gather(*(mgr.run_single(data[i:i + 1]) for i in range(len(data))))

    asyncio.run(run())
    assert {ref for c in sc.calls for _, _, ref in c} == {("4", "four")}


def _custom_reward_fn(name: str, reward_kwargs: dict):
    """verl 0.9.1's own loader of ``reward.custom_reward_function`` (path, name, reward_kwargs)."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn

    cfg = OmegaConf.create({"reward": {"custom_reward_function": {"path": "pkg://rewardkit.integrations.verl", "name": name,
                                                                   "reward_kwargs": reward_kwargs}}})
    return get_custom_reward_fn(cfg)


def test_reward_kwargs_choose_the_scorer_and_its_options(monkeypatch):
    # before: compute_score(..., scorer="verifier") still failed with "set REWARDKIT_SCORER"
    monkeypatch.delenv("REWARDKIT_SCORER", raising=False)
    fn = _custom_reward_fn("compute_score", {"scorer": "verifier", "options": {"timeout": 2.0}, "masked_reward": -1})
    assert fn(data_source="math", solution_str=r"\boxed{4}", ground_truth="4", extra_info={}) == {
        "score": 1.0, "rewardkit_ok": 1.0}
    assert fn(data_source="math", solution_str=r"\boxed{4}", ground_truth=None, extra_info={}) == {
        "score": -1.0, "rewardkit_ok": 0.0}  # no reference: masked, with the masked_reward asked for
    with pytest.raises(TypeError, match=r"unknown reward_kwargs \['sorer'\]"):
        _custom_reward_fn("compute_score", {"sorer": "verifier"})(data_source="m", solution_str="x", ground_truth="1")
    with pytest.raises(ValueError, match="relative to its group"):
        _custom_reward_fn("compute_score", {"scorer": "majority-vote"})(data_source="m", solution_str="x",
                                                                         ground_truth="1")


def test_verls_naive_manager_awaits_compute_score_async_and_rows_are_scored_together(monkeypatch):
    """verl 0.9.1's NaiveRewardManager sees a coroutine function (no thread), and the rows it awaits at once
    are scored in one scorer call, off the event loop."""
    from omegaconf import OmegaConf
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

    import rewardkit.integrations.verl as rv

    monkeypatch.delenv("REWARDKIT_SCORER", raising=False)
    sc = Recorder()
    monkeypatch.setattr(rv, "_SCORERS", {}, raising=True)
    fn = _custom_reward_fn("compute_score_async", {"scorer": "verifier"})
    loop_thread: list[int] = []
    real = rv.load_scorer

    def recording(name, options, judge):  # the verifier, recording the threads its calls run on
        inner = real(name, options, judge)

        class Wrapped(type(inner)):
            def _score(self, groups):
                import threading

                loop_thread.append(threading.get_ident())
                sc.calls.append([(g.prompt, list(g.responses), g.reference) for g in groups])
                return super()._score(groups)

        return Wrapped(inner.options)

    monkeypatch.setattr(rv, "load_scorer", recording)
    cfg = OmegaConf.create({"reward": {"custom_reward_function": {}}})
    rows = [("Q1?", r"\boxed{4}", "u1", "4"), ("Q2?", r"\boxed{6}", "u2", "6"),
            ("Q1?", r"\boxed{four}", "u1", ["4", "four"]), ("Q2?", r"\boxed{7}", "u2", "6")]
    data = _batch(rows, CharTokenizer())

    async def run():
        import threading

        main = threading.get_ident()
        mgr = NaiveRewardManager(cfg, CharTokenizer(), compute_score=fn)  # in the worker's loop, as verl builds it
        assert mgr.is_async_reward_score  # verl awaits it on its loop instead of run_in_executor
        outs = await asyncio.gather(*(mgr.run_single(data[i:i + 1]) for i in range(len(data))))
        return main, outs

    main, outs = asyncio.run(run())
    assert [o["reward_score"] for o in outs] == [1.0, 1.0, 1.0, 0.0]
    assert sum(len(c) for c in sc.calls) == 4  # verl decodes each row in a thread first: they arrive apart
    assert loop_thread and main not in loop_thread  # scored off the event loop's thread


def test_rows_awaiting_compute_score_async_together_are_one_scorer_call(monkeypatch):
    import rewardkit.integrations.verl as rv

    calls: list[int] = []

    class Counting(Recorder):
        name = "counting"

        def _score(self, groups):
            calls.append(len(groups))
            return super()._score(groups)

    monkeypatch.setitem(rv._SCORERS, json.dumps(["counting", {}, None], sort_keys=True), Counting())

    async def run():
        return await asyncio.gather(*(rv.compute_score_async("math", r, "4", scorer="counting")
                                      for r in ("a", "bb", "FAIL", "dddd")))

    outs = asyncio.run(run())
    assert calls == [4]  # four rows awaiting at once: one scorer call
    assert [o["rewardkit_ok"] for o in outs] == [1.0, 1.0, 0.0, 1.0]


def test_say_once_keys_on_the_reason_not_the_text(monkeypatch, caplog):
    from rewardkit.integrations import assembler

    monkeypatch.setattr(assembler, "_SAID", set(), raising=False)
    with caplog.at_level("WARNING"):
        for row in range(3):  # one reason, messages that differ by the row's values
            assembler.say_once("list ground truth", f"row {row}: ground_truth is a list")
        assembler.say_once("partial", "a group closed short")
    assert [r.getMessage() for r in caplog.records] == ["row 0: ground_truth is a list", "a group closed short"]


class _Picks(list):
    """The reward workers' handle list, recording which one verl's ``random.choice`` picks for each row."""

    picked: list[int]

    def __getitem__(self, i):
        self.picked.append(i)
        return super().__getitem__(i)


@pytest.mark.slow
def test_random_dispatch_over_verl_reward_workers_scores_every_group_whole_once(monkeypatch):
    """verl 0.9.1's own RewardLoopManager starts 3 real reward-loop worker actors on a local Ray cluster and its
    AgentLoopWorker._compute_score sends each finished sample to random.choice(workers), as in training."""
    import random
    from pathlib import Path

    ray = import_or_skip("ray", "Ray is the optional 'ray' extra")
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput, AgentLoopWorker
    from verl.experimental.reward_loop.reward_loop import RewardLoopManager

    from rewardkit.backends.embedded import embedded_model_path
    from rewardkit.integrations.assembler import ASSEMBLER_NAME

    model = str(embedded_model_path())
    n, n_groups = 4, 6
    cfg = OmegaConf.create({
        "actor_rollout_ref": {"model": {"path": model, "tokenizer_path": None},
                              "rollout": {"n": n, "val_kwargs": {"n": 1}}},  # 1: the warning to say once
        "reward": {"num_workers": 3, "reward_model": {"enable": False, "enable_resource_pool": False},
                   "custom_reward_function": {"path": None}, "sandbox_fusion": None,
                   "reward_manager": {"source": "importlib", "name": "RewardkitLoopManager",
                                      "module": {"path": "pkg://rewardkit.integrations.verl"}}}})
    tok = AutoTokenizer.from_pretrained(model)
    # group k: three responses answer k, one answers k + 100 (in a different place each time): the whole
    # group's majority is k, so exactly the rows answering k get 1; any split of the group changes that
    rows = []
    for k in range(n_groups):
        for j in range(n):
            ans = k + 100 if j == k % n else k
            rows.append((f"uid{k}", f"Question {k}: what is {k}?", f"I think it is \\boxed{{{ans}}}.", ans == k))
    random.Random(7).shuffle(rows)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"REWARDKIT_SCORER": "majority-vote"}})
    try:
        workers = RewardLoopManager(cfg).reward_loop_worker_handles  # verl's own reward-loop workers
        ray.get([w.__ray_ready__.remote() for w in workers])
        picks = _Picks(workers)
        picks.picked = []
        agent = object.__new__(AgentLoopWorker)  # only the attributes _compute_score reads
        agent.reward_loop_worker_handles, agent.processor, agent.mm_processor_kwargs = picks, None, None

        async def one(uid, prompt, response):
            out = AgentLoopOutput(prompt_ids=tok.encode(prompt), response_ids=tok.encode(response),
                                  response_mask=[1] * len(tok.encode(response)), metrics=AgentLoopMetrics())
            await agent._compute_score([out], kwargs={"uid": uid, "data_source": "test",
                                                      "reward_model": {"ground_truth": "unused"}})
            return out

        async def all_rows():  # finished samples arrive one by one, as generation finishes
            tasks = []
            for uid, p, r, _ in rows:
                tasks.append(asyncio.ensure_future(one(uid, p, r)))
                await asyncio.sleep(0.01)
            return await asyncio.wait_for(asyncio.gather(*tasks), 240)  # group_timeout is 300 s

        random.seed(0)
        outs = asyncio.run(all_rows())
        counts = ray.get(ray.get_actor(ASSEMBLER_NAME).counts.remote())
        logs = Path(ray._private.worker._global_node.get_logs_dir_path())
    finally:
        ray.shutdown()
    said = [x for f in logs.glob("worker-*") for x in f.read_text(errors="replace").splitlines() if "val_kwargs.n=1" in x]
    assert len(said) == 1, said  # by the job's assembler, not by each of the 3 workers
    by_uid: dict[str, set[int]] = {}
    for (uid, *_), w in zip(rows, picks.picked, strict=True):
        by_uid.setdefault(uid, set()).add(w)
    assert any(len(ws) > 1 for ws in by_uid.values())  # verl's dispatch did split groups across workers
    assert [o.reward_score for o in outs] == [1.0 if ok else 0.0 for *_, ok in rows]
    info = [o.extra_fields["reward_extra_info"] for o in outs]
    assert all(i["rewardkit_partial"] == 0.0 and i["rewardkit_group_size"] == n for i in info)
    # no partial group: nobody waited out the group timeout (a group closed by it is partial)
    assert counts["groups"] == n_groups and counts["partial_groups"] == 0 and counts["rows"] == n * n_groups


def test_compute_score_serves_per_response_scorers_and_refuses_group_ones(monkeypatch):
    from rewardkit.integrations import verl as rv

    monkeypatch.setenv("REWARDKIT_SCORER", "verifier")
    monkeypatch.delenv("REWARDKIT_SCORER_OPTIONS", raising=False)
    assert rv.compute_score("math", r"so \boxed{4}", "4") == {"score": 1.0, "rewardkit_ok": 1.0}
    assert rv.compute_score("math", r"\boxed{5}", "4")["score"] == 0.0
    monkeypatch.setenv("REWARDKIT_SCORER", "majority-vote")
    with pytest.raises(ValueError, match="relative to its group"):
        rv.compute_score("math", "x", "4")


def test_a_reward_model_that_is_not_verls_dict_is_an_error_not_an_abstain():
    # before: a string reward_model was read as "no reference", so every response of the batch abstained
    from omegaconf import OmegaConf

    from rewardkit.integrations.verl import reward_manager_for

    data = _batch(ROWS, CharTokenizer())
    data.non_tensor_batch["reward_model"] = np.array(["4", "6", "4", "6"], dtype=object)
    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {"n": 2}}})
    mgr = reward_manager_for(Recorder())(cfg, CharTokenizer(), None, assembler="local")
    with pytest.raises(ValueError, match="reward_model must be a dict with 'ground_truth' .*got str '4'"):
        asyncio.run(mgr.run_single(data[0:1]))


def verl_function(module: str, qualname: str):
    """A function of verl's installed source, run as written without importing its module (verl's trainer module
    imports peft, torchdata and wandb, which the reward path's environment does not install)."""
    import ast
    import json
    import os
    import textwrap
    from pathlib import Path

    path = Path(verl.__file__).parent.joinpath(*module.split(".")[1:]).with_suffix(".py")
    source = path.read_text()
    cls, name = qualname.split(".")
    node = next(f for c in ast.parse(source).body if isinstance(c, ast.ClassDef) and c.name == cls
                for f in c.body if isinstance(f, ast.FunctionDef) and f.name == name)
    ns: dict = {"os": os, "json": json}
    exec(textwrap.dedent(ast.get_source_segment(source, node)), ns)  # noqa: S102 - verl's own code
    return ns[name]


def test_verls_own_generation_dump_is_rescored_by_rewardkit(tmp_path):
    """The file verl's trainer writes to ``trainer.rollout_data_dir`` (``RayPPOTrainer._write_generations``, the
    method's own code) is read by ``rewardkit score`` as it is: groups are the responses to one input of one step."""
    import json

    from rewardkit.cli.app import app
    from typer.testing import CliRunner

    write_generations = verl_function("verl.trainer.ppo.ray_trainer", "RayPPOTrainer._write_generations")
    inputs = ["user\nWhat is 2+2?\nassistant\n", "user\nWhat is 3+3?\nassistant\n"] * 2
    outputs = [r"\boxed{4}", r"\boxed{7}", r"\boxed{5}", r"\boxed{6}"]
    write_generations(inputs, outputs, ["4", "6", "4", "6"], [1.0, 0.0, 0.0, 1.0], {"acc": [1.0, 0.0, 0.0, 1.0]},
                      str(tmp_path), 5)
    out = tmp_path / "o.jsonl"
    res = CliRunner().invoke(app, ["score", str(tmp_path / "5.jsonl"), "--scorer", "verifier", "--out", str(out),
                                   "--with-texts"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    # each row keeps the dump's step and its prompt (ids from step and prompt, not line numbers)
    assert [(r["step"], r["prompt"], r["rewards"]) for r in rows] == [(5, inputs[0], [1.0, 0.0]), (5, inputs[1], [0.0, 1.0])]
    assert all(r["id"].startswith("step5-") for r in rows)
