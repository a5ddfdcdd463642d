"""Whole groups under the trainers' own dispatch, at their defaults: verl 0.9.1's reward loop and OpenRLHF 0.11.2's client.

verl: verl's RewardLoopManager starts ``reward.num_workers`` (default 8) real reward-loop worker actors on a
local Ray cluster; every finished sample goes through verl's own ``AgentLoopWorker._compute_score``, which
sends it to ``random.choice(workers)``. Rows arrive in a random order over a few seconds, as generation
finishes. Compared: each worker assembling its own rows (rewardkit before this change; ``--verl-baseline``)
against the job's shared Ray group assembler, both with verl's default group_timeout of 300 s.

OpenRLHF: its own ``SingleTurnAgentExecutor`` (generation stubbed; tokenising, the query, the POST and its
5 retries real) sends one request per sample, the whole rollout batch at once (``rollout.batch_size`` 1024 x
``n_samples_per_prompt``), to a real ``rewardkit serve --group-size n`` process; its own
``_process_response_into_experience`` turns the answers into tensors. Compared at ``--n`` samples per prompt:
the former limit (256 requests in the server, waiting ones included: ``--max-pending 256``) against the
default; then at full size, ``--full-n`` (16 and 32: 16,384 and 32,768 rows in flight), the default, and at 32
the former default ``--max-pending 16384``. Each row's latency runs from its sample finishing to its reward
(p50, p99); scorer calls are the server's own count (``/health``).

Scorer: ``majority-vote`` (model-free, group-relative). Each group has one dissenting answer, so the whole
group's reward of every row is known by construction; "wrong" counts rows whose reward differs from it.
Needs verl and openrlhf installed with --no-deps (docs/integrations.md).

    python benchmarks/trainer_dispatch.py [--prompts 1024] [--verl-prompts 128] [--n 8] [--full-n 16,32]
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import os
import random
import re
import subprocess
import sys
import time
import types
import urllib.request
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, ROOT, machine, write_results  # noqa: E402

from rewardkit.integrations.verl import RewardkitLoopManager  # noqa: E402
from rewardkit.testing import reward_server  # noqa: E402


class PerWorkerLoopManager(RewardkitLoopManager):
    """The baseline: each reward-loop worker gathers only the rows verl happens to send it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, assembler="local", **kwargs)


def _rows(prompts: int, n: int, seed: int = 0) -> list[tuple[str, str, str, float]]:
    """(group key, prompt, response, whole-group majority-vote reward), shuffled like finishing samples."""
    rows = []
    for k in range(prompts):
        for j in range(n):
            ans = k + 1 if j == k % n else k
            rows.append((f"uid{k}", f"Question {k}: what is {k}? Answer: ", f"\\boxed{{{ans}}}", float(ans == k)))
    random.Random(seed).shuffle(rows)
    return rows


# ------------------------------------------------------------------------------------------------ verl
def run_verl(prompts: int, n: int, baseline: bool) -> dict:
    import ray
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput, AgentLoopWorker
    from verl.experimental.reward_loop.reward_loop import RewardLoopManager

    from rewardkit.backends.embedded import embedded_model_path

    model = str(embedded_model_path())
    manager = ({"source": "importlib", "name": "PerWorkerLoopManager", "module": {"path": str(Path(__file__))}}
               if baseline else
               {"source": "importlib", "name": "RewardkitLoopManager",
                "module": {"path": "pkg://rewardkit.integrations.verl"}})
    cfg = OmegaConf.create({
        "actor_rollout_ref": {"model": {"path": model, "tokenizer_path": None},
                              "rollout": {"n": n, "val_kwargs": {"n": n}}},
        "reward": {"num_workers": 8, "reward_model": {"enable": False, "enable_resource_pool": False},
                   "custom_reward_function": {"path": None}, "sandbox_fusion": None, "reward_manager": manager}})
    tok = AutoTokenizer.from_pretrained(model)
    rows = _rows(prompts, n)
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"REWARDKIT_SCORER": "majority-vote",
                                       "PYTHONPATH": os.pathsep.join([str(ROOT / "benchmarks"), str(ROOT)])}})
    try:
        workers = RewardLoopManager(cfg).reward_loop_worker_handles
        ray.get([w.__ray_ready__.remote() for w in workers])
        agent = object.__new__(AgentLoopWorker)
        agent.reward_loop_worker_handles, agent.processor, agent.mm_processor_kwargs = workers, None, None

        async def one(uid, prompt, response, delay):
            await asyncio.sleep(delay)
            out = AgentLoopOutput(prompt_ids=tok.encode(prompt), response_ids=tok.encode(response),
                                  response_mask=[1] * len(tok.encode(response)), metrics=AgentLoopMetrics())
            await agent._compute_score([out], kwargs={"uid": uid, "data_source": "bench",
                                                      "reward_model": {"ground_truth": "unused"}})
            return out

        async def all_rows():
            rng = random.Random(1)
            return await asyncio.gather(*(one(u, p, r, rng.uniform(0, 5)) for u, p, r, _ in rows))

        random.seed(0)
        t0 = time.perf_counter()
        outs = asyncio.run(all_rows())
        seconds = time.perf_counter() - t0
    finally:
        ray.shutdown()
    info = [o.extra_fields["reward_extra_info"] for o in outs]
    partial = {u for (u, *_), i in zip(rows, info, strict=True) if i["rewardkit_partial"]}
    return {"framework": "verl 0.9.1", "dispatch": "random.choice over reward.num_workers=8",
            "setting": "per-worker assembly (before)" if baseline else "shared Ray assembler",
            "rows_in_flight": len(rows), "seconds": round(seconds, 1), "groups": prompts,
            "partial_groups": len(partial), "lost_rewards": sum(o.reward_score is None for o in outs),
            "wrong_rewards": sum(o.reward_score != want for o, (*_, want) in zip(outs, rows, strict=True))}


# ------------------------------------------------------------------------------------------------ OpenRLHF
def _openrlhf():
    stubs = {"vllm": types.ModuleType("vllm"), "vllm.inputs": types.ModuleType("vllm.inputs"),
             "vllm.utils": types.ModuleType("vllm.utils")}
    stubs["vllm"].SamplingParams, stubs["vllm"].__version__ = object, "0.0"
    stubs["vllm.inputs"].TokensPrompt, stubs["vllm.utils"].random_uuid = object, lambda: "x"
    sys.modules.update(stubs)  # vllm cannot install here; these modules only import names from it
    from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    return SingleTurnAgentExecutor, SamplesGenerator._process_response_into_experience


_FINISHED: contextvars.ContextVar[list] = contextvars.ContextVar("finished")  # per row (task): when generated


class _Engine:
    def __init__(self, tok, replies):
        self.tok, self.replies, self.rng = tok, replies, random.Random(2)

    async def generate(self, prompt_token_ids, params, multi_modal_data=None):
        await asyncio.sleep(self.rng.uniform(0, 5))  # samples finish over a few seconds, in any order
        _FINISHED.get().append(time.perf_counter())
        text = self.replies[self.tok.decode(prompt_token_ids)].pop()
        return SimpleNamespace(outputs=[SimpleNamespace(token_ids=self.tok.encode(text, add_special_tokens=False),
                                                        finish_reason="stop", logprobs=None)])


def run_openrlhf(prompts: int, n: int, max_pending: int | None) -> dict:
    import resource

    from transformers import AutoTokenizer

    from rewardkit.backends.embedded import embedded_model_path

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # one connection per row in flight, as OpenRLHF's
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # client opens; the server inherits the limit
    executor_cls, to_experience = _openrlhf()
    tok = AutoTokenizer.from_pretrained(str(embedded_model_path()))
    rows = _rows(prompts, n)
    want = {}
    replies: dict[str, list[str]] = {}
    for _, p, r, w in rows:
        replies.setdefault(p, []).append(r)
        want.setdefault(p, []).append(w)
    extra = [] if max_pending is None else ["--max-pending", str(max_pending)]
    url, proc = reward_server(["--scorer", "majority-vote", "--group-size", str(n), *extra], cwd=str(ROOT))
    health: dict = {}
    try:
        ex = executor_cls(url)
        engine = _Engine(tok, {p: list(v) for p, v in replies.items()})
        params = SimpleNamespace(max_tokens=32, logprobs=None)

        async def one(p):  # one sample: its reward's latency runs from its generation finishing
            mark: list[float] = []
            _FINISHED.set(mark)
            out = await ex.execute(p, "", params, 256, tok, engine)
            return out, time.perf_counter() - mark[0]

        async def rollout():
            return await asyncio.gather(*(one(p) for _, p, _, _ in rows))

        t0 = time.perf_counter()
        done = asyncio.run(rollout())
        seconds = time.perf_counter() - t0
        outs, waits = [o for o, _ in done], sorted(w for _, w in done)
        with urllib.request.urlopen(url.replace("/get_reward", "/health"), timeout=30) as r:
            health = json.loads(r.read())
        with open(f"/proc/{proc.pid}/stat") as f:  # the server's CPU seconds (user + system)
            server_cpu = sum(int(x) for x in f.read().rsplit(")", 1)[1].split()[11:13]) / os.sysconf("SC_CLK_TCK")
        me = resource.getrusage(resource.RUSAGE_SELF)
        client_cpu, load = me.ru_utime + me.ru_stime, os.getloadavg()[0]
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        proc.log_reader.join(timeout=30)
    log = sorted({x.strip()[:200] for x in proc.log_lines})
    lost = sum(o["reward"] is None for o in outs)
    crashed = 0
    got: dict[str, list[float]] = {}
    for o in outs:
        try:
            e = to_experience(None, o)
            if e.rewards is None:
                raise ValueError("no reward")
        except Exception:  # noqa: BLE001 - OpenRLHF fails on this row (a None reward)
            crashed += 1
            continue
        got.setdefault(o["prompt"], []).append(float(e.rewards.item()))
    partial = len({o["prompt"] for o in outs if o["extra_logs"].get("partial_group") == [1.0]})
    wrong = sum(sorted(got.get(p, [])) != sorted(w) for p, w in want.items())
    return {"framework": "OpenRLHF 0.11.2", "dispatch": "one query per request, whole rollout batch at once",
            "setting": f"--max-pending {max_pending} (the former limit)" if max_pending else "defaults",
            "scorer_calls": health.get("scorer_calls"), "server_cpu_s": round(server_cpu, 1),
            "client_cpu_s": round(client_cpu, 1), "load_average_1min": round(load, 1),
            "rows_in_flight": len(rows), "seconds": round(seconds, 1), "groups": prompts,
            "p50_s": round(waits[len(waits) // 2], 1), "p99_s": round(waits[int(len(waits) * 0.99)], 1),
            "partial_groups": partial, "lost_rewards": lost,
            "rows_openrlhf_cannot_use": crashed, "groups_with_wrong_rewards": wrong,
            "server_log_lines": len(proc.log_lines), "server_log_distinct": [_no_prefix(x) for x in log[:10]]}


def _no_prefix(line: str) -> str:
    """A log line without this interpreter's install path (results never record where they ran)."""
    return line.replace(sys.base_prefix, "<python>").replace(sys.prefix, "<python>")


def _fd_note(results: list[dict]) -> str:
    """What a row past this machine's open-file limit measures (one connection per row in flight)."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    over = [r["rows_in_flight"] for r in results if r["framework"].startswith("OpenRLHF")
            and hard != resource.RLIM_INFINITY and r["rows_in_flight"] + 256 > hard]
    if not over:
        return ""
    return (f" {max(over):,} one-query requests need as many connections in one server process, and this machine's "
            f"hard open-file limit is {hard:,} per process (not raisable here): that row shows what happens past "
            "it. `rewardkit serve` says so at start and answers 503 past the limit, OpenRLHF retries five times "
            "and loses those rows, and every group comes back partial. With `ulimit -Hn` above the rows in "
            "flight the default `--max-pending 32768` admits them (not measured here).")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=1024, help="OpenRLHF rollout.batch_size (its default 1024)")
    ap.add_argument("--verl-prompts", type=int, default=128, help="verl prompts per batch")
    ap.add_argument("--n", type=int, default=8, help="samples per prompt (group size)")
    ap.add_argument("--full-n", default="16,32", help="OpenRLHF samples per prompt at full size (comma-separated)")
    ap.add_argument("--only", choices=["verl", "openrlhf", "full"], default=None,
                    help="run one part and keep the other rows of the last run (full: the full-size OpenRLHF runs)")
    ap.add_argument("--child-timeout", type=float, default=900.0, help="seconds before a run counts as not finished")
    ap.add_argument("--render", action="store_true", help="only rewrite the table from the saved results")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:  # one measurement per fresh process (Ray and the client's state never carry over)
        kind, setting, n = a.child.split(":")
        pending = 256 if setting == "baseline" else None
        res = (run_verl(a.verl_prompts, int(n), setting == "baseline") if kind == "verl" else
               run_openrlhf(a.prompts, int(n), pending))
        print("RESULT " + json.dumps(res), flush=True)
        return
    results: list[dict] = []
    command = " ".join(["python", "benchmarks/trainer_dispatch.py", *sys.argv[1:]])
    full = [("openrlhf", "new", int(x)) for x in a.full_n.split(",") if x]
    runs = ([("openrlhf", "baseline", a.n), ("openrlhf", "new", a.n)] + full
            + [("verl", "baseline", a.n), ("verl", "new", a.n)])
    part = {"verl": "verl", "openrlhf": "OpenRLHF"}
    if a.only == "full":
        runs = full
    elif a.only:
        runs = [r for r in runs if r[0] == a.only]
    prev = RESULTS / "trainer_dispatch.json"
    if a.render:
        results, runs = json.loads(prev.read_text())["results"], []
    elif a.only and prev.exists():  # keep the rows of the last run that this one does not redo
        redo = {(part[k], n * (a.verl_prompts if k == "verl" else a.prompts)) for k, _, n in runs}
        results = [r for r in json.loads(prev.read_text())["results"]
                   if (r["framework"].split()[0], r["rows_in_flight"]) not in redo]
    for kind, setting, n in runs:
        try:
            done = subprocess.run([sys.executable, __file__, "--child", f"{kind}:{setting}:{n}", "--prompts",
                                   str(a.prompts), "--verl-prompts", str(a.verl_prompts)],
                                  capture_output=True, text=True, cwd=ROOT, timeout=a.child_timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{kind}:{setting}:{n} did not finish within {a.child_timeout:g}s") from None
        m = re.search(r"^RESULT (.*)$", done.stdout, re.M)
        if not m:
            raise RuntimeError(f"{kind}:{setting}:{n} failed:\n{done.stderr[-3000:]}")
        results.append({**json.loads(m.group(1)), "command": command})
        print(results[-1], flush=True)
    results.sort(key=lambda r: (not r["framework"].startswith("OpenRLHF"), r["rows_in_flight"],
                                "before" not in r["setting"] and "former" not in r["setting"]))
    head = ("| framework | dispatch | setting | rows in flight | seconds | p50 / p99 s | server / client CPU s "
            "(load) | scorer calls | partial groups | lost rewards | wrong rewards |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in results:
        wrong = r.get("wrong_rewards", r.get("groups_with_wrong_rewards"))
        unit = "rows" if "wrong_rewards" in r else "groups"
        lost = r["lost_rewards"]
        if "rows_openrlhf_cannot_use" in r:
            lost = f"{lost} (OpenRLHF cannot use {r['rows_openrlhf_cannot_use']})"
        lat = f"{r['p50_s']} / {r['p99_s']}" if "p99_s" in r else "-"
        cpu = (f"{r['server_cpu_s']} / {r['client_cpu_s']} ({r['load_average_1min']})" if "server_cpu_s" in r
               else "-")
        lines.append(f"| {r['framework']} | {r['dispatch']} | {r['setting']} | {r['rows_in_flight']} | "
                     f"{r['seconds']} | {lat} | {cpu} | {r.get('scorer_calls') or '-'} | {r['partial_groups']} of "
                     f"{r['groups']} | {lost} | {wrong} {unit} |")
    commands = sorted({r.get("command", "python benchmarks/trainer_dispatch.py --prompts 1024 --verl-prompts 128 "
                                        "--n 8 (before the full-size runs were added)") for r in results})
    md = ("# Whole groups under verl's and OpenRLHF's own dispatch, at their defaults\n\n"
          "Every row is one fresh process; a full run is `python benchmarks/trainer_dispatch.py`, and `--only "
          "openrlhf|verl|full` re-runs a part, keeping the other rows. The rows below come from: "
          + "; ".join(f"`{c}`" for c in commands) + "."
          "\n\nScorer `majority-vote`, groups of n with one dissenting answer each: a row's reward is known from "
          "its whole group. Seconds: from the first sample finishing (spread over 5 s) to the last reward, on "
          "a 2-core machine shared with other jobs; verl's group_timeout is 300 s, `rewardkit serve`'s 150 s. "
          "p50 / p99: each row's wait from its sample finishing to its reward. They are bounded by CPU: the batch "
          "arrives as one burst, a group closes only when its last row is read, and OpenRLHF's client (its "
          "executor, one aiohttp session per request) shares the 2 cores with the server; CPU s: what each "
          "process used, with the machine's 1-minute load average at the end. Scorer calls: the server's count; "
          "a group is scored as soon as it closes and the scorer is free." + _fd_note(results) + "\n\n"
          + "\n".join(lines) + "\n")
    write_results("trainer_dispatch", {"machine": machine(), "args": vars(a), "results": results}, md)
    print(md)


if __name__ == "__main__":
    main()
