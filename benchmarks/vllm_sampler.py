"""GRPO step time with rollouts from a colocated vLLM engine vs from the policy itself (transformers), one process.

Two trainers on the same prompts, seed and settings (``sampler=vllm`` and ``sampler=transformers``; the embedded
SmolLM2-135M, fp32 on CPU), rewarded by ``LengthScorer``. One untimed warm-up step each, then ``--reps`` steps
each, alternating, every step timed whole (sample, score, update, and for vLLM the weight sync into its engine);
the ratio is transformers' best step time over vLLM's. Both trainers walk the same prompts step by step, but
each samples its own responses, so rows, and so the tokens per step, differ: tokens per second are reported too.
Needs vLLM (on CPU: ``scripts/vllm_cpu_env.sh --build-only``, then ``.venv-vllm/bin/python``)::

    .venv-vllm/bin/python benchmarks/vllm_sampler.py --reps 3

On a GPU with vLLM's CUDA build (not run here: the GPU lent to this project has no vLLM)::

    python benchmarks/vllm_sampler.py --device cuda --dtype auto --prompts 16 --samples 8 --max-new-tokens 512 \
        --model HuggingFaceTB/SmolLM2-1.7B-Instruct --reps 5 --out vllm_sampler_gpu
"""

from __future__ import annotations

import argparse
import os
import platform
import time

from _common import machine, rel_path, write_results  # noqa: E402  (benchmarks/ is on sys.path as a script)

KEYS = ("step_seconds", "sample_seconds", "sync_seconds", "response_length", "reward_mean", "sampler_logp_diff_max")


def step(trainer) -> dict:
    """One timed GRPO step (the trainer's own timings), advancing its step counter."""
    row = trainer.train_step()
    trainer.step += 1
    rows = trainer.config.prompts_per_step * trainer.config.samples_per_prompt
    out = {k: float(row[k]) if k == "sampler_logp_diff_max" else round(float(row[k]), 4) for k in KEYS if k in row}
    out["tokens_per_s"] = round(rows * row["response_length"] / row["sample_seconds"], 2)
    return out


def markdown(res: dict) -> str:
    runs, m, s = res["runs"], res["machine"], res["settings"]
    reps = len(runs["vllm"])
    md = ["# GRPO step time: sampler=vllm vs sampler=transformers", "",
          f"Command: `{res['command']}` (one process; vLLM {res['versions']['vllm']}, torch {res['versions']['torch']}).",
          "",
          f"Policy: {res['model']} ({s['dtype']}, device {s['device']}); {s['prompts_per_step']} prompts x "
          f"{s['samples_per_prompt']} samples per step, at most {s['max_new_tokens']} new tokens, `LengthScorer`, "
          f"prompts from `{res['data']}`. One warm-up step each (untimed), then {reps} steps each, alternating.", "",
          f"Machine: {m['cores_usable']} CPU cores shared with other jobs (1-minute load {m['load_avg_1m']:.1f} at the "
          f"end). vLLM runs in the trainer's process (colocated) and its CPU build binds the process's OpenMP "
          f"threads ({res['torch_threads']} torch thread(s) at the end, for both trainers).", "",
          "| sampler | load (s) | " + " | ".join(f"rep {i + 1} step s" for i in range(reps))
          + " | best step s | best sample s | sync s (best step) | tokens/s (best step) |",
          "|---|---:|" + "---:|" * reps + "---:|---:|---:|---:|"]
    for n in ("transformers", "vllm"):
        best = min(runs[n], key=lambda r: r["step_seconds"])
        md.append(f"| {n} | {res['load_seconds'][n]} | " + " | ".join(f"{r['step_seconds']:.2f}" for r in runs[n])
                  + f" | {best['step_seconds']:.2f} | {best['sample_seconds']:.2f} | "
                  f"{best.get('sync_seconds', 0):.2f} | {best['tokens_per_s']:.1f} |")
    md += ["", f"- **step time transformers / vLLM = {res['step_ratio']:.2f}x** (best of {reps}; per rep: "
               f"{', '.join(f'{r:.2f}x' for r in res['step_ratio_per_rep'])}); sampling alone "
               f"{res['sample_ratio']:.2f}x; sampled tokens per second {res['tokens_per_s_ratio']:.2f}x.",
           f"- vLLM's log-probabilities of its sampled tokens vs the policy's: at most "
           f"{res['max_sampler_logp_diff']:.1e} over every timed step (the sync kept them in step).",
           "- GPU: not measured (no vLLM on the GPU lent here); the command is in the script's docstring and "
           "docs/training.md.", ""]
    return "\n".join(md)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--data", default=None, help="JSONL prompts (default: ../shared/data/gsm8k/test.jsonl)")
    ap.add_argument("--prompts", type=int, default=4, help="prompts per step")
    ap.add_argument("--samples", type=int, default=8, help="samples per prompt")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default="vllm_sampler")
    args = ap.parse_args()

    import tempfile

    from rewardkit.evals.data import shared_dir

    from rewardkit.grpo import GRPOTrainer, TrainConfig, read_prompts
    from rewardkit.grpo.toy_rewards import LengthScorer

    data = args.data or str(shared_dir() / "data" / "gsm8k" / "test.jsonl")
    prompts = read_prompts(data, limit=64)
    trainers, load = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("transformers", "vllm"):  # transformers first: vLLM's CPU worker then binds the threads
            cfg = TrainConfig(model=args.model, out_dir=f"{tmp}/{name}", sampler=name, dtype=args.dtype,
                              device=args.device, prompts_per_step=args.prompts, samples_per_prompt=args.samples,
                              max_new_tokens=args.max_new_tokens, beta=0.0, lr=1e-5, steps=10**6,
                              checkpoint_every=10**6, tensorboard=False)
            t0 = time.perf_counter()
            trainers[name] = GRPOTrainer(cfg, prompts, LengthScorer(target=40))
            load[name] = round(time.perf_counter() - t0, 1)
        for name, t in trainers.items():
            print("warm-up", name, step(t), flush=True)
        runs: dict[str, list[dict]] = {"transformers": [], "vllm": []}
        for _ in range(args.reps):
            for name, t in trainers.items():
                runs[name].append(step(t))
                print(name, runs[name][-1], flush=True)
        trainers["vllm"].close()
    import torch
    import vllm

    def best(name: str, key: str, f=min) -> float:
        return f(r[key] for r in runs[name])

    cmd = ".venv-vllm/bin/python benchmarks/vllm_sampler.py" + "".join(
        f" --{k.replace('_', '-')} {v}" for k, v in vars(args).items() if v != ap.get_default(k))
    res = {
        "command": cmd, "machine": {**machine(), "cpu": platform.processor() or platform.machine(),
                                    "cores_usable": len(os.sched_getaffinity(0)), "load_avg_1m": os.getloadavg()[0]},
        "versions": {"vllm": vllm.__version__, "torch": torch.__version__}, "model": args.model,
        "data": rel_path(data), "torch_threads": torch.get_num_threads(),
        "settings": {"dtype": args.dtype, "device": args.device, "prompts_per_step": args.prompts,
                     "samples_per_prompt": args.samples, "max_new_tokens": args.max_new_tokens},
        "load_seconds": load, "runs": runs,
        "step_ratio": round(best("transformers", "step_seconds") / best("vllm", "step_seconds"), 3),
        "step_ratio_per_rep": [round(a["step_seconds"] / b["step_seconds"], 3)
                               for a, b in zip(runs["transformers"], runs["vllm"], strict=True)],
        "sample_ratio": round(best("transformers", "sample_seconds") / best("vllm", "sample_seconds"), 3),
        "tokens_per_s_ratio": round(best("vllm", "tokens_per_s", max) / best("transformers", "tokens_per_s", max), 3),
        "max_sampler_logp_diff": max(r["sampler_logp_diff_max"] for r in runs["vllm"]),
    }
    md = markdown(res)
    write_results(args.out, res, md)
    print(md)


if __name__ == "__main__":  # vLLM's engine may spawn processes: nothing may start at import time
    main()
