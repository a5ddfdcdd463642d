"""GRPO learns a trivially learnable reward on CPU: the mean reward rises over a short run.

The policy is the embedded SmolLM2-135M-Instruct; prompts are the first GSM8K test questions from the
shared data folder; the reward is ``LengthScorer`` (min(1, target / characters): brevity), which the
model can raise by ending earlier or by emitting fewer characters per token. The baseline is the same run's own first steps (the
initial policy). Writes benchmarks/results/grpo_learning.{md,json,png}.

    python benchmarks/grpo_learning.py            # about 15 minutes on a shared 2-core CPU
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, machine, write_results  # noqa: E402
from rewardkit.evals.data import data_path  # noqa: E402

from rewardkit.grpo import GRPOTrainer, TrainConfig, read_prompts  # noqa: E402
from rewardkit.grpo.toy_rewards import LengthScorer  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--window", type=int, default=4, help="steps averaged at the start and at the end")
    ap.add_argument("--target", type=int, default=40)
    args = ap.parse_args()
    cmd = "python benchmarks/grpo_learning.py " + " ".join(sys.argv[1:])
    prompts = read_prompts(data_path("gsm8k", "test.jsonl"), limit=args.prompts)
    out = Path(tempfile.mkdtemp(prefix="grpo-learning-"))
    cfg = TrainConfig(out_dir=str(out), steps=args.steps, prompts_per_step=2, samples_per_prompt=4,
                      max_new_tokens=24, lr=1e-4, beta=0.0, loss="grpo", num_threads=1, tensorboard=False,
                      checkpoint_every=args.steps)
    t0 = time.perf_counter()
    rows = GRPOTrainer(cfg, prompts, LengthScorer(target=args.target)).train(
        on_step=lambda r: print(f"step {r['step']}: reward {r['reward_mean']:.3f} length {r['response_length']:.1f}", flush=True))
    seconds = time.perf_counter() - t0
    shutil.rmtree(out, ignore_errors=True)
    w = args.window
    first = sum(r["reward_mean"] for r in rows[:w]) / w
    last = sum(r["reward_mean"] for r in rows[-w:]) / w
    len_first = sum(r["response_length"] for r in rows[:w]) / w
    len_last = sum(r["response_length"] for r in rows[-w:]) / w

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([r["step"] for r in rows], [r["reward_mean"] for r in rows], marker="o", label="mean reward")
    ax.set_xlabel("step")
    ax.set_ylabel(f"reward (LengthScorer, target {args.target})")
    ax2 = ax.twinx()
    ax2.plot([r["step"] for r in rows], [r["response_length"] for r in rows], color="tab:orange", alpha=0.6,
             label="response tokens")
    ax2.set_ylabel("response tokens")
    ax.set_title("GRPO on CPU, SmolLM2-135M-Instruct")
    fig.legend(loc="upper center", bbox_to_anchor=(0.5, 0.92), ncol=2, fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "grpo_learning.png", dpi=120)

    data = {"command": cmd, "machine": machine(), "config": {k: v for k, v in vars(cfg.resolved()).items() if k != "out_dir"},
            "prompts": f"gsm8k/test.jsonl (first {args.prompts})", "reward": f"LengthScorer(target={args.target})",
            "seconds": seconds, "reward_first": first, "reward_last": last, "reward_ratio": last / first,
            "length_first": len_first, "length_last": len_last,
            "steps": [{k: r[k] for k in ("step", "reward_mean", "response_length", "kl", "entropy", "loss",
                                        "step_seconds")} for r in rows]}
    md = f"""# GRPO learning curve on CPU

Command: `{cmd}` ({seconds / 60:.1f} min on a shared {machine()['cpus']}-core CPU, no GPU).

Policy: embedded SmolLM2-135M-Instruct (fp32); {args.prompts} GSM8K test questions (shared data), 2 prompts
x 4 samples per step, at most 24 new tokens, clipped GRPO without KL (beta 0), AdamW lr 1e-4.
Reward: `LengthScorer(target={args.target})` = min(1, {args.target} / characters), a reward the model can
raise by ending earlier or by emitting fewer characters per token. Baseline: the same run's first {w} steps (the initial policy).

| | first {w} steps | last {w} steps |
|---|---|---|
| mean reward | {first:.3f} | {last:.3f} ({last / first:.2f}x) |
| response tokens | {len_first:.1f} | {len_last:.1f} |

![curve](grpo_learning.png)
"""
    write_results("grpo_learning", data, md)
    print(md)


if __name__ == "__main__":
    main()
