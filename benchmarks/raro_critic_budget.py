"""How long the embedded model's RARO critic rollouts are: the token budget that lets the critic finish.

RARO's shared-LLM mode samples critic rollouts from the policy itself (Algorithm 2 line 14). A rollout cut
off before its verdict is unparseable and masked, so a budget below the critic's natural length wastes
the critic side of the batch. This samples the embedded SmolLM2-135M-Instruct as the critic on real
(question, expert solution, Qwen2.5 answer) pairs from the shared MATH rollouts once, at a long budget,
and reports for each shorter budget which fraction of the samples would be cut off and which parse.
Sampling is sequential, so the first b tokens of a sample are what a run at budget b would sample.

    python benchmarks/raro_critic_budget.py            # 64 minutes on the shared, loaded 2-core CPU (16 samples x 1,024 tokens)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, rel_path, rollouts_path, write_results  # noqa: E402

from rewardkit.grpo import TrainConfig  # noqa: E402
from rewardkit.grpo.trainer import Learner  # noqa: E402
from rewardkit.raro.critic import answer_view, critic_messages, expert_positions  # noqa: E402
from rewardkit.verdicts import parse_answer_choice  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=8)
    ap.add_argument("--samples", type=int, default=2, help="critic rollouts per pair")
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument("--budgets", default="64,128,256,384,512,768,1024")
    args = ap.parse_args()
    cmd = " ".join(["python benchmarks/raro_critic_budget.py", *sys.argv[1:]])
    path = rollouts_path()
    rows = [json.loads(x) for x in path.read_text().splitlines()[: args.problems]]
    pos = expert_positions(len(rows), 0, "critic-budget")
    chats = []
    for r, p in zip(rows, pos, strict=True):
        expert, policy = answer_view(r["solution"]), answer_view(r["responses"][0])
        a1, a2 = (expert, policy) if p == 1 else (policy, expert)
        chats.append(critic_messages(r["problem"], a1, a2))
    learner = Learner(TrainConfig(beta=0.0, num_threads=1, max_new_tokens=args.max_tokens))
    t0 = time.perf_counter()
    roll = learner.sample(chats, args.samples, seed_key=(0, 1), max_new_tokens=args.max_tokens)
    seconds = time.perf_counter() - t0
    tok = learner.tokenizer
    lengths = [len(c) for c in roll.completion_ids]  # tokens, end-of-sequence included when it came
    finished = [not t for t in roll.truncated]
    table = []
    for b in (int(x) for x in args.budgets.split(",")):
        done = [f and n <= b for f, n in zip(finished, lengths, strict=True)]
        texts = [tok.decode(c[:b], skip_special_tokens=True) for c in roll.completion_ids]
        # as the scorers read them: a critic cut at the budget is invalid whatever its text holds
        parsed = [parse_answer_choice(t, None if d else "length").ok for t, d in zip(texts, done, strict=True)]
        table.append({"budget": b, "cut_off": sum(not d for d in done), "parseable": sum(parsed),
                      "parseable_and_finished": sum(p and d for p, d in zip(parsed, done, strict=True))})
    n = len(lengths)
    data = {"command": cmd, "machine": machine(), "data": rel_path(path), "problems": len(rows),
            "samples": n, "sample_seconds": seconds, "lengths": lengths, "finished": finished, "budgets": table,
            # the sampled critic tokens and texts, so a change to the verdict reader can be checked on these very samples
            "completion_ids": [list(map(int, c)) for c in roll.completion_ids],
            "texts": [tok.decode(c, skip_special_tokens=True) for c in roll.completion_ids]}
    lines = ["# RARO critic rollouts of the embedded model: the budget that lets the critic finish\n",
             f"Command: `{cmd}` ({seconds / 60:.1f} min of sampling on a shared {machine()['cpus']}-core CPU).\n",
             f"SmolLM2-135M-Instruct (fp32, temperature 1) as the relativistic critic on {len(rows)} (question, "
             f"expert solution, first Qwen2.5 answer) pairs from `{rel_path(path)}`, {args.samples} rollouts "
             f"each ({n} samples), sampled once at {args.max_tokens} tokens. Natural lengths (tokens, sorted): "
             f"{sorted(lengths)}; {sum(not f for f in finished)} of {n} never ended within {args.max_tokens}.\n",
             "| budget (tokens) | cut off | parseable verdict | parseable and finished |", "|---|---|---|---|"]
    lines += [f"| {t['budget']} | {t['cut_off']} / {n} | {t['parseable']} / {n} | {t['parseable_and_finished']} / {n} |"
              for t in table]
    write_results("raro_critic_budget", data, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
