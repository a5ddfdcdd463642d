"""Peak memory and seconds per call of the local judge: pointwise rubric judge in logit mode on real rollouts.

Each configuration runs in its own process (peak RSS = that process's ``ru_maxrss``: model weights, torch
and every forward). "before" reproduces the settings and verdict path rewardkit had before issue 12:
float32, batches of 8 rows whatever their length, torch's default threads, and each of the three choices
(1 / 0.5 / 0) scored by a separate forward over prompt + choice with full-vocabulary logits at every
position. "after" is today's default backend. The machine is shared, so configurations alternate (ABAB)
and the speed result is the ratio of seconds per call within each round, not absolute seconds.

    PYTHONPATH=. python benchmarks/judge_memory.py --groups 1 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CONFIGS = {
    "before": {"legacy": True, "dtype": "float32", "batch_size": 8, "num_threads": os.cpu_count()},
    "after": {},  # the defaults: dtype auto, batch_tokens 4096, sdpa, default_threads()
    "after-threads1": {"num_threads": 1},
    "after-threads2": {"num_threads": 2},
    "before-fp32-1thread": {"legacy": True, "dtype": "float32", "batch_size": 8, "num_threads": 1},
    "after-fp32-1thread": {"dtype": "float32", "num_threads": 1},
}


def legacy_backend(**kw):
    """The pre-issue-12 backend: a separate full-logits forward per (prompt, choice) for multi-token choices."""
    import numpy as np

    from rewardkit.backends.base import choice_result
    from rewardkit.backends.transformers_backend import TransformersBackend
    class Legacy(TransformersBackend):
        def _verdict_probs(self, requests):
            torch = self.torch
            from rewardkit.backends.base import continuation_tokens

            out = [None] * len(requests)
            prompts, conts = [], []
            for r in requests:
                text = self.render(r.messages, r.assistant_prefix)
                p = self.encode(text)
                prompts.append(p)
                conts.append([continuation_tokens(self.encode, text, p, c) for c in r.choices])
            seqs = [(i, j) for i in range(len(requests)) for j in range(len(conts[i]))]
            seqs.sort(key=lambda ij: len(prompts[ij[0]]) + len(conts[ij[0]][ij[1]]))
            scores = {}
            for b in range(0, len(seqs), 8):  # count batches, as before
                items = seqs[b:b + 8]
                ids, mask, pos = self._pad([prompts[i] + conts[i][j] for i, j in items])
                with torch.inference_mode():
                    logp = torch.log_softmax(self.model(input_ids=ids, attention_mask=mask,
                                                        position_ids=pos).logits.float(), -1)
                width = ids.shape[1]
                for k, (i, j) in enumerate(items):
                    c = conts[i][j]
                    start = width - len(c)
                    scores[(i, j)] = float(sum(logp[k, start + t - 1, tok].item() for t, tok in enumerate(c)))
            for i in range(len(requests)):
                lp = np.array([scores[(i, j)] for j in range(len(conts[i]))])
                out[i] = choice_result(lp, len(prompts[i]))  # non-finite log-probabilities: an ERROR, as today
            return out

    return Legacy("smollm2", **kw)


def worker(name: str, groups: int) -> dict:
    """Load the judge in this process, score ``groups`` groups, report seconds per call and peak RSS."""
    from rewardkit.evals.data import rollouts_path

    from rewardkit.arena.scorers import PointwiseScorer
    from rewardkit.backends.transformers_backend import TransformersBackend
    from rewardkit.types import Group

    cfg = dict(CONFIGS[name])
    legacy = cfg.pop("legacy", False)
    t0 = time.perf_counter()
    backend = legacy_backend(**cfg) if legacy else TransformersBackend("smollm2", **cfg)
    load_s = time.perf_counter() - t0
    rss_load = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = [json.loads(line) for line in rollouts_path().open()][:groups]
    batch = [Group(id=g["id"], prompt=g["problem"], responses=g["responses"], reference=g["answer"]) for g in rows]
    scorer = PointwiseScorer(judge=backend, mode="logit")
    t = time.perf_counter()
    scores = scorer.score(batch)
    secs = time.perf_counter() - t
    calls = sum(len(g.responses) for g in batch)
    import torch

    return {"config": name, "model": backend.model_id, "threads": torch.get_num_threads(),
            "batch_tokens": None if legacy else backend.batch_tokens, "load_seconds": round(load_s, 2),
            "calls": calls, "seconds_per_call": round(secs / calls, 3),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "peak_rss_after_load_mb": round(rss_load, 1),
            "rewards": [[round(float(x), 4) for x in s.rewards] for s in scores],
            "statuses_ok": sum(st.value == "ok" for s in scores for st in s.statuses)}


def run(name: str, groups: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("OMP_NUM_THREADS", None)
    env.pop("REWARDKIT_TORCH_THREADS", None)
    p = subprocess.run([sys.executable, __file__, "--worker", name, "--groups", str(groups)], cwd=ROOT, env=env,
                       capture_output=True, text=True, check=True)
    res = json.loads(p.stdout.strip().splitlines()[-1])
    print(json.dumps(res), file=sys.stderr, flush=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=1, help="rollout groups per run (8 judge calls each)")
    ap.add_argument("--rounds", type=int, default=2, help="ABAB rounds of each comparison")
    ap.add_argument("--worker", choices=sorted(CONFIGS), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.groups)))
        return

    from benchmarks._common import machine, write_results

    runs: list[dict] = []
    pairs = {"before/after": ("before", "after"), "threads 2/1": ("after-threads2", "after-threads1"),
             "verdict path only (fp32, 1 thread) before/after": ("before-fp32-1thread", "after-fp32-1thread")}
    ratios: dict[str, list[float]] = {k: [] for k in pairs}
    for _ in range(args.rounds):
        for label, (a, b) in pairs.items():
            ra, rb = run(a, args.groups), run(b, args.groups)
            runs += [ra, rb]
            ratios[label].append(ra["seconds_per_call"] / rb["seconds_per_call"])
    by = {n: [r for r in runs if r["config"] == n] for n in CONFIGS}
    summary = {n: {"model": rs[0]["model"], "threads": rs[0]["threads"], "batch_tokens": rs[0]["batch_tokens"],
                   "peak_rss_mb_max": max(r["peak_rss_mb"] for r in rs),
                   "peak_rss_after_load_mb": max(r["peak_rss_after_load_mb"] for r in rs),
                   "seconds_per_call_median": statistics.median(r["seconds_per_call"] for r in rs)}
               for n, rs in by.items() if rs}
    agree = max(abs(x - y) for ra, rb in zip(by["before"], by["after"], strict=True)
                for gx, gy in zip(ra["rewards"], rb["rewards"], strict=True) for x, y in zip(gx, gy, strict=True))
    data = {"command": "PYTHONPATH=. python benchmarks/judge_memory.py "
                       f"--groups {args.groups} --rounds {args.rounds}",
            "machine": {**machine(), "loadavg_at_end": [round(x, 1) for x in os.getloadavg()]},
            "data": "math_rollouts_qwen25/math_cot_100.jsonl (first groups; pointwise rlaif rubric, logit mode)",
            "summary": summary, "ratios_per_round": {k: [round(x, 2) for x in v] for k, v in ratios.items()},
            "max_abs_reward_diff_before_after": round(agree, 4), "runs": runs}
    md = ["# Local judge memory and speed (embedded SmolLM2-135M, pointwise rubric, logit mode)", "",
          f"`{data['command']}`; {args.groups} group(s) x 8 responses of the shared Qwen2.5-Math rollouts per run, "
          f"each run in a fresh process; {os.cpu_count()} CPUs shared with other work (load average at the end "
          f"{data['machine']['loadavg_at_end'][0]}), so speed is given as ratios within ABAB rounds.", "",
          "| configuration | model@dtype | threads | batching | peak RSS (MB) | RSS after load (MB) |",
          "|---|---|---:|---|---:|---:|"]
    for n, s in summary.items():
        batching = f"{s['batch_tokens']} tokens" if s["batch_tokens"] else "8 rows"
        md.append(f"| {n} | {s['model']} | {s['threads']} | {batching} | {s['peak_rss_mb_max']:.0f} | "
                  f"{s['peak_rss_after_load_mb']:.0f} |")
    md += ["", "| ratio of seconds per call | per round | median |", "|---|---|---:|"]
    for k, v in ratios.items():
        md.append(f"| {k} | {', '.join(f'{x:.2f}' for x in v)} | {statistics.median(v):.2f} |")
    md += ["", "- before/after > 1: the new default is faster by that factor; threads 2/1 > 1: two threads are "
               "slower per call than one on this shared machine; the fp32 1-thread pair isolates the verdict path "
               "(KV-cache continuation + token budget vs a full-logits forward per choice).",
           f"- Rewards before vs after differ by at most {agree:.4f} (float32 vs bfloat16 weights).",
           "- before: float32, batches of 8 rows, torch default threads, one full-logits forward per "
           "(prompt, choice); after: `TransformersBackend()` defaults (dtype auto = bfloat16 on this CPU, "
           "batch_tokens 4096, sdpa, choices continued from the prompt's KV cache, `default_threads()`)."]
    write_results("judge_memory", data, "\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
