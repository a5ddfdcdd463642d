"""Judges that learn, on held-out problems (issue 23): GAR's slice discriminator and RARO's critic.

Stages (each resumable, each merging its results into benchmarks/results/judge_training.json and
re-rendering judge_training.md / .png; trained weights go to runs/judges/, never into git):

    python benchmarks/judge_training.py samples     # the embedded model's own answers for the critic pairs
    python benchmarks/judge_training.py gar         # before, GAR stage-1 SFT with early stopping, after
    python benchmarks/judge_training.py critic      # before, RARO critic training on R_crit, after
    python benchmarks/judge_training.py headline    # headline judge rows, untrained vs trained, 10 mixed groups

Every split is by problem (``rewardkit.evals.splits``); the headline's mixed-group problems are pinned to
the held-out split of both judges.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, rel_path  # noqa: E402
from rewardkit.evals.data import data_path, rollouts_path  # noqa: E402

WORK = ROOT / "runs" / "judges"
NAME = "judge_training"
SEED = 0
SAMPLE_PROBLEMS_MATH500 = 150  # MATH-500 problems (besides the rollouts' 100) that get an embedded-model answer


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ------------------------------------------------------------------------------------------ data


def rollout_rows() -> list[dict[str, Any]]:
    from rewardkit.evals.critic_pairs import read_jsonl

    return read_jsonl(rollouts_path())


def math500_rows() -> list[dict[str, Any]]:
    from rewardkit.evals.critic_pairs import read_jsonl

    return read_jsonl(data_path("math500", "test.jsonl"))


def mixed_problems() -> list[str]:
    """Problems of the shared rollouts' mixed groups (some but not all 8 answers correct): the headline's judge rows."""
    return [r["problem"] for r in rollout_rows() if 0 < sum(r["correct"]) < len(r["correct"])]


def sample_problems() -> list[Any]:
    """The problems the embedded model answers: the rollouts' 100 and a seeded sample of other MATH-500 ones."""
    import random

    from rewardkit.evals.loaders import Problem
    from rewardkit.evals.splits import problem_key

    roll = rollout_rows()
    seen = {problem_key(r["problem"]) for r in roll}
    rest = [r for r in math500_rows() if problem_key(r["problem"]) not in seen]
    pick = sorted(random.Random(SEED).sample(range(len(rest)), SAMPLE_PROBLEMS_MATH500))
    return [Problem(r["id"], r["problem"], r["answer"]) for r in roll] + \
        [Problem(rest[i]["id"], rest[i]["problem"], rest[i]["answer"]) for i in pick]


def stage_samples(a: argparse.Namespace) -> None:
    """The embedded model's own answers (one per problem, seeded), graded by the verifier."""
    from rewardkit.evals.generate import generate_rollouts

    from rewardkit.backends import load_backend

    out = WORK / "smollm2_samples.jsonl"
    problems = sample_problems()
    log(f"sampling {len(problems)} answers into {rel_path(out)}")
    t0 = time.perf_counter()
    s = generate_rollouts(problems, load_backend("smollm2", dtype="float32", batch_size=8), out, n=1,
                          max_tokens=a.sample_tokens, temperature=0.7, top_p=0.95, seed=SEED, batch_size=8,
                          bench="math", on_batch=lambda n: log(f"  +{n}"))
    log(f"done: {s.generated_now} new, {s.skipped_done} already there, {len(s.failed)} failed, "
        f"{time.perf_counter() - t0:.0f} s")


# ------------------------------------------------------------------------------------------ main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stage", choices=["samples"])
    ap.add_argument("--sample-tokens", type=int, default=192, help="samples: tokens per embedded-model answer")
    a = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    {"samples": stage_samples}[a.stage](a)


if __name__ == "__main__":
    main()
