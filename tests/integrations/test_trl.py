"""The TRL adapter: TRL 1.16's real GRPOTrainer runs on CPU with a rewardkit scorer as its reward function."""

from __future__ import annotations

import numpy as np
import pytest

from rewardkit.grpo.toy_rewards import LengthScorer
from rewardkit.integrations.trl import scorer_reward_func
from rewardkit.types import GroupScore, Status


class MaskLast(LengthScorer):
    """LengthScorer whose last response in each group fails (status error); records the groups it saw."""

    def _setup(self):
        self.seen: list[tuple[str, int, str | None, str | None]] = []

    def _score(self, groups):
        self.seen += [(g.prompt, len(g), g.reference, g.expert) for g in groups]
        out = []
        for s in super()._score(groups):
            st = [Status.OK] * (len(s.rewards) - 1) + [Status.ERROR]
            out.append(GroupScore(s.group_id, np.where(np.arange(len(s.rewards)) < len(st) - 1, s.rewards, np.nan), st))
        return out


def test_reward_function_scores_whole_groups_and_returns_none_for_masked():
    sc = MaskLast(target=5)
    f = scorer_reward_func(sc)
    prompts = [[{"role": "user", "content": "A?"}]] * 2 + [[{"role": "user", "content": "B?"}]] * 2
    completions = [[{"role": "assistant", "content": t}] for t in ("abcde", "x" * 50, "abcdefghij", "y")]
    logged = {}
    out = f(prompts=prompts, completions=completions, completion_ids=[[1]] * 4, answer=["1", "1", "2", "2"],
            trainer_state=None, log_metric=lambda k, v: logged.__setitem__(k, v), log_extra=None)
    assert out == [1.0, None, 0.5, None]
    assert sc.seen == [("A?", 2, "1", None), ("B?", 2, "2", None)]
    assert logged["rewardkit/length/masked_fraction"] == 0.5  # rewardkit/<scorer>/..., the prefix said once


def test_incomplete_groups_are_an_error_when_num_generations_is_known():
    f = scorer_reward_func(LengthScorer(), num_generations=4)
    with pytest.raises(ValueError, match="num_generations is 4"):
        f(prompts=["p", "p", "q"], completions=["a", "b", "c"])
    with pytest.raises(ValueError, match="completions 0-1 .* different prompts"):
        scorer_reward_func(LengthScorer(), num_generations=2)(prompts=["p", "q", "q", "p"], completions=list("abcd"))


def test_a_list_reference_column_means_any_of_them_is_right():
    f = scorer_reward_func("verifier")  # before: refused ("holds a list of 2 references")
    out = f(prompts=["2+2?"] * 3 + ["1/2?"] * 2, completions=[r"\boxed{four}", r"\boxed{4}", r"\boxed{5}", r"\boxed{0.5}", "2"],
            answer=[["4", "four"]] * 3 + [np.array(["1/2", "0.5"])] * 2)  # an Arrow list column arrives as numpy
    assert out == [1.0, 1.0, 0.0, 1.0, 0.0]


def test_groups_are_trls_blocks_of_num_generations_not_prompt_text():
    # two identical dataset rows in one batch: TRL computes advantages over two groups of 4, not one of 8
    sc = MaskLast(target=1)
    f = scorer_reward_func(sc, num_generations=4)
    out = f(prompts=["Same?"] * 8, completions=["a"] * 8)
    assert [n for _, n, _, _ in sc.seen] == [4, 4]
    assert out == [1.0, 1.0, 1.0, None] * 2


def test_a_group_relative_scorer_without_num_generations_is_refused_in_one_line():
    with pytest.raises(ValueError, match="pass num_generations="):  # called outside a trainer: nothing to follow
        scorer_reward_func("majority-vote")(prompts=["q", "q"], completions=["a", "b"])
    votes = scorer_reward_func("majority-vote", num_generations=3)(
        prompts=["2+2?"] * 6, completions=[r"\boxed{4}", r"\boxed{5}", r"\boxed{5}", r"\boxed{4}", r"\boxed{4}", r"\boxed{5}"])
    assert votes == [0.0, 1.0, 1.0, 1.0, 1.0, 0.0]  # two votes of three, not one of six (a tie)


def test_several_rewardkit_functions_log_their_metrics_under_their_own_names():
    logged: dict[str, list[float]] = {}
    log = lambda k, v: logged.setdefault(k, []).append(v)  # noqa: E731
    for f in (scorer_reward_func(MaskLast(target=1), name="masked"), scorer_reward_func(LengthScorer(target=1))):
        f(prompts=["p", "p"], completions=["a", "bb"], log_metric=log)
    assert logged["rewardkit/masked/masked_fraction"] == [0.5]  # the function's name, as TRL's rewards/<name>/mean
    assert logged["rewardkit/length/masked_fraction"] == [0.0]  # not rewardkit/rewardkit_length/...
    assert set(logged) == {f"rewardkit/{n}/{m}" for n in ("masked", "length")
                           for m in ("masked_fraction", "judge_calls")}


@pytest.mark.model
@pytest.mark.slow
def test_trl_grpo_trainer_runs_two_cpu_steps_with_a_rewardkit_scorer(tmp_path):
    trl = pytest.importorskip("trl", reason="TRL is in the dev extra: pip install trl==1.16.0")
    import torch
    from datasets import Dataset

    from rewardkit.backends.embedded import embedded_model_path

    torch.set_num_threads(1)
    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": "Say yes."}], "answer": "yes"},
                            {"prompt": [{"role": "user", "content": "Say no."}], "answer": "no"}])
    sc = MaskLast(target=5)
    args = trl.GRPOConfig(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=3, num_generations=3,
                          max_completion_length=8, use_cpu=True, report_to="none", save_strategy="no",
                          logging_steps=1, learning_rate=1e-5, bf16=False, log_completions=True)
    trainer = trl.GRPOTrainer(model=str(embedded_model_path()), args=args, train_dataset=ds,
                              reward_funcs=[scorer_reward_func(sc, num_generations=3)])
    trainer.train()
    assert trainer.state.global_step == 2
    assert sorted(sc.seen) == [("Say no.", 3, "no", None), ("Say yes.", 3, "yes", None)]  # whole groups
    key = "rewardkit/length/masked_fraction"  # rewardkit/<scorer>/...
    logs = [h for h in trainer.state.log_history if key in h]
    assert len(logs) == 2 and all(h[key] == pytest.approx(1 / 3) for h in logs)
    assert all(np.isfinite(h["rewards/rewardkit_length/mean"]) for h in logs)
    # TRL's completion logs (log_completions: OUTPUT_DIR/completions/completions_STEP.parquet) re-score as they
    # are, put together too: one group per prompt and step (a step here generates one prompt's 3 completions)
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rewardkit.runtime.inputs import read_groups

    logged = sorted((tmp_path / "completions").glob("completions_*.parquet"))
    assert [f.name for f in logged] == ["completions_00001.parquet", "completions_00002.parquet"]
    pq.write_table(pa.concat_tables([pq.read_table(f) for f in logged]), tmp_path / "all.parquet")
    groups = list(read_groups(tmp_path / "all.parquet"))
    assert sorted((g.metadata["step"], len(g)) for g in groups) == [(1, 3), (2, 3)]
    assert {g.prompt for g in groups} == {"Say no.", "Say yes."}


_TWO_PROCESS_SCRIPT = r'''
import json, os, sys
sys.path.insert(0, os.environ["RK_ROOT"])
import conftest  # noqa: F401  (this checkout's rewardkit)
import numpy as np
from accelerate import PartialState
from rewardkit.integrations.trl import scorer_reward_func
from rewardkit.scoring import BaseScorer
from rewardkit.types import GroupScore, Status

class Index(BaseScorer):
    name = "index"
    def _score(self, groups):  # reward = position in the group; logs every call with its process
        with open(os.environ["RK_LOG"] + f".{PartialState().process_index}", "a") as f:
            f.write(json.dumps([[g.prompt, g.responses] for g in groups]) + "\n")
        return [GroupScore(g.id, np.arange(len(g), dtype=float), [Status.OK] * len(g)) for g in groups]

st = PartialState(cpu=True)  # what GRPOTrainer's Accelerator sets up
# TRL's layout: the batch [p0 p0 p1 p1 p2 p2] (num_generations=2 in a row) cut into contiguous per-process slices
rows = {0: [("p0", "a"), ("p0", "b"), ("p1", "c")], 1: [("p1", "d"), ("p2", "e"), ("p2", "f")]}[st.process_index]
out = scorer_reward_func(Index(), num_generations=2)(prompts=[p for p, _ in rows], completions=[c for _, c in rows])
# each rank's rewards in a file of its own (lines both ranks print to torchrun's one stdout were lost under load)
with open(os.environ["RK_OUT"] + f".{st.process_index}", "w") as f:
    f.write(json.dumps(out))
# Leave without tearing gloo down. Any teardown races the peer: whichever rank closes its sockets first,
# the other can still be destroying its process group, and a gloo object destroyed with a live thread calls
# std::terminate ("terminate called without an active exception", exit code 1; torchrun then kills the other
# rank). destroy_process_group() after a barrier only narrows that window (5 of 6 runs passed with both
# cores busy). After the barrier no collective is left, so each rank exits at once, running no destructors.
st.wait_for_everyone()
os._exit(0)
'''


@pytest.mark.slow
def test_groups_split_across_two_processes_are_scored_whole_once(tmp_path):
    """TRL may split a prompt's completions over processes: two real torch.distributed (gloo) processes."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "two.py"
    script.write_text(_TWO_PROCESS_SCRIPT)
    import os

    # a trainer run earlier in this process leaves accelerate/torch.distributed variables behind: drop them
    dist = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK"}
    env = {k: v for k, v in os.environ.items() if k not in dist and not k.startswith(("ACCELERATE_", "TORCHELASTIC_"))}
    env.update(RK_ROOT=str(Path(__file__).resolve().parents[2]), RK_LOG=str(tmp_path / "calls"),
               RK_OUT=str(tmp_path / "rewards"))
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results = {int(p.suffix[1:]): json.loads(p.read_text()) for p in tmp_path.glob("rewards.*")}
    # p1 = [c | d] is split over the processes: rewards are positions within the WHOLE group, each process its slice
    assert results == {0: [0.0, 1.0, 0.0], 1: [1.0, 0.0, 1.0]}
    calls = sorted(p.name for p in tmp_path.glob("calls.*"))
    assert calls == ["calls.0"]  # one scorer call, on the main process only
    assert json.loads((tmp_path / "calls.0").read_text()) == [["p0", ["a", "b"]], ["p1", ["c", "d"]], ["p2", ["e", "f"]]]


def test_the_docs_example_logs_rewards_at_every_step():
    """docs/integrations.md's TRL example, run up to its GRPOConfig with TRL's own class: with max_steps=2 and
    TRL's default logging_steps (10) the rewards would appear only in the final summary."""
    import re
    from pathlib import Path

    trl = pytest.importorskip("trl", reason="TRL is in the dev extra: pip install trl==1.16.0")
    doc = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text()
    code = re.search(r"## TRL\n+```python\n(.*?)```", doc, re.S).group(1)
    setup = code[:code.index("reward = ")]  # imports, the dataset and the GRPOConfig; no training
    ns: dict = {}
    exec(setup, ns)  # noqa: S102 - the documented example itself
    args = ns["args"]
    assert isinstance(args, trl.GRPOConfig) and args.logging_steps <= 1 <= args.max_steps


class Blocks(LengthScorer):
    """Records the size of every group it scores (to see which block size the reward function used)."""

    def _setup(self):
        self.sizes: list[int] = []

    def _score(self, groups):
        self.sizes += [len(g) for g in groups]
        return super()._score(groups)


@pytest.mark.model
@pytest.mark.slow
def test_trl_evaluation_groups_by_num_generations_eval(tmp_path):
    """TRL 1.16 evaluates with num_generations_eval completions per prompt: the reward function follows the
    trainer (before: 'completions 0-3 ... have different prompts' on the first eval batch)."""
    trl = pytest.importorskip("trl", reason="TRL is in the dev extra: pip install trl==1.16.0")
    import torch
    from datasets import Dataset

    from rewardkit.backends.embedded import embedded_model_path

    torch.set_num_threads(1)
    ds = Dataset.from_list([{"prompt": "Say yes.", "answer": "yes"}, {"prompt": "Say no.", "answer": "no"}])
    sc = Blocks(target=5)
    args = trl.GRPOConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=4,
                          num_generations_eval=2, per_device_eval_batch_size=4, max_completion_length=4, use_cpu=True,
                          report_to="none", save_strategy="no", eval_strategy="no", logging_steps=1, bf16=False)
    trainer = trl.GRPOTrainer(model=str(embedded_model_path()), args=args, train_dataset=ds, eval_dataset=ds,
                              reward_funcs=[scorer_reward_func(sc, num_generations=4)])
    metrics = trainer.evaluate()
    assert sc.sizes == [2, 2]  # one eval batch: both prompts, num_generations_eval=2 completions each
    assert np.isfinite(metrics["eval_rewards/rewardkit_length/mean"])
    trainer.train()
    assert sc.sizes[2:] == [4]  # training: blocks of num_generations


@pytest.mark.model
@pytest.mark.slow
def test_trl_awaits_the_async_reward_function_with_its_other_async_ones(tmp_path):
    trl = pytest.importorskip("trl", reason="TRL is in the dev extra: pip install trl==1.16.0")
    import torch
    from datasets import Dataset
    from trl.trainer.utils import is_async_callable

    from rewardkit.backends.embedded import embedded_model_path
    from rewardkit.integrations.trl import async_scorer_reward_func

    torch.set_num_threads(1)
    calls: list[int] = []

    async def other(prompts, completions, **kw):  # the trainer's other async reward function
        calls.append(len(completions))
        return [0.0] * len(completions)

    sc = Blocks(target=5)
    f = async_scorer_reward_func(sc)  # no num_generations=: the trainer's is followed
    assert is_async_callable(f) and f.__name__ == "rewardkit_length"
    ds = Dataset.from_list([{"prompt": "Say yes."}, {"prompt": "Say yes."}])  # one prompt twice: two groups
    args = trl.GRPOConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=2,
                          max_completion_length=4, use_cpu=True, report_to="none", save_strategy="no",
                          logging_steps=1, bf16=False)
    trainer = trl.GRPOTrainer(model=str(embedded_model_path()), args=args, train_dataset=ds, reward_funcs=[f, other])
    trainer.train()
    assert sc.sizes == [2, 2] and calls == [4]  # TRL's blocks of 2, not one group of 4 equal prompts
    assert np.isfinite(trainer.state.log_history[0]["rewards/rewardkit_length/mean"])


def test_the_async_reward_function_leaves_the_event_loop_free():
    """A scorer blocked until another coroutine on the same loop runs: scoring on the loop itself would never
    let that coroutine run (the scorer gives up after 30 s and fails the test); in a worker thread it does."""
    import asyncio
    import threading

    from rewardkit.integrations.trl import async_scorer_reward_func

    released = threading.Event()

    class Waits(LengthScorer):
        def _score(self, groups):
            if not released.wait(30):
                raise RuntimeError("the other reward function never ran while this one scored")
            return super()._score(groups)

    async def other(prompts, completions, **kw):
        released.set()
        return [0.0] * len(completions)

    async def run():
        f = async_scorer_reward_func(Waits(target=1))
        return await asyncio.gather(f(prompts=["p", "p"], completions=["a", "bb"]), other(["p", "p"], ["a", "bb"]))

    assert asyncio.run(run()) == [[1.0, 0.5], [0.0, 0.0]]
