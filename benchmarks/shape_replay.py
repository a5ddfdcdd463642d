"""Issue 10: the scorers' logic is unchanged, judged by a deterministic scripted judge (no model numerics).

Each judge scorer scores the first groups of the shared rollouts twice, once with the source tree before
the refactor and once after, each in its own subprocess, against the same judge: its verdict
probabilities and generated verdicts are a pure function of the prompt text (SHA-256), so any difference
in prompts, routing, parsing or reward maths shows up as a different row. The embedded-model runs
(benchmarks/shape_compare.py) differ by model numerics as well, which this replay leaves out.

    PYTHONPATH=. python benchmarks/shape_replay.py BEFORE_SRC AFTER_SRC [--groups 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from _common import RESULTS, rel_path, rollouts_path  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

# (registry name, options before, options after): only the spellings issue 10 renamed differ
CASES = [
    ("pointwise", {"mode": "logit"}, {"mode": "logit"}),
    ("pointwise", {"mode": "generate"}, {"mode": "generate"}),
    ("adaptive-pointwise", {"mode": "logit", "use_labels": True}, {"mode": "logit", "use_labels": True}),
    ("tournament", {"mode": "logit"}, {"mode": "logit"}),
    ("tournament", {"mode": "generate"}, {"mode": "generate"}),
    ("arena", {"mode": "logit", "use_labels": True}, {"mode": "logit", "use_labels": True}),
    ("slices", {"mode": "logit"}, {"mode": "logit"}),
    ("slices", {"mode": "generate"}, {"mode": "generate"}),
    ("critic", {"mode": "logits"}, {"mode": "logit"}),
    ("critic", {"mode": "generate"}, {"mode": "generate"}),
    ("llm-judge", {"mode": "logits"}, {"mode": "logit"}),
    ("llm-judge", {"mode": "generate"}, {"mode": "generate"}),
]

CHILD = r'''
import hashlib, json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import conftest  # noqa: F401  (maps cli/, evals/ into rewardkit)
from rewardkit.backends.base import Completion, JudgeBackend, VerdictResult
from rewardkit.scoring import get_scorer
from rewardkit.types import Group

def h(text):
    return hashlib.sha256(text.encode()).digest()

class HashJudge(JudgeBackend):
    model_id = "hash-judge"
    def generate(self, requests):
        out = []
        for r in requests:
            d = h(r.messages[-1]["content"])
            pick = ["\\boxed{A}", "\\boxed{B}", "\\boxed{Tie}", "\\boxed{1}", "\\boxed{0.5}", "\\boxed{0}",
                    "**YES**", "**NO**", "Answer 1", "Answer 2", "tie", "Final judgment: True",
                    "Final judgment: False", "no verdict"]
            out.append(Completion([pick[(d[0] + k) % len(pick)] for k in range(r.n)], prompt_tokens=7, completion_tokens=3))
        return out
    def verdict_probs(self, requests):
        out = []
        for r in requests:
            d = h(r.messages[-1]["content"] + "|" + r.assistant_prefix)
            p = np.array([1 + d[i] for i in range(len(r.choices))], float)
            out.append(VerdictResult(p / p.sum(), prompt_tokens=7))
        return out
    def count_tokens(self, texts):
        return [len(t.split()) for t in texts]

name, opts, n = sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
rows = [json.loads(l) for l in open(sys.argv[5])][:n]
groups = [Group(r["id"], r["problem"], r["responses"], reference=r["answer"], expert=r["solution"],
                labels=[bool(x) for x in r["correct"]]) for r in rows]
key = "backend" if name == "slices" and "backend" in sys.argv[6] else "judge"
sc = get_scorer(name, **{key: HashJudge()}, **opts)
out = []
for s in sc.score(groups):
    out.append({"id": s.group_id, "rewards": [None if x != x else round(float(x), 12) for x in s.rewards],
                "statuses": [str(x) for x in s.statuses], "judge_calls": s.cost.judge_calls,
                "prompt_tokens": s.cost.prompt_tokens})
print(json.dumps(out))
'''


def run(src: Path, name: str, opts: dict, groups: int, data: Path, slice_key: str) -> list[dict]:
    r = subprocess.run([sys.executable, "-c", CHILD, str(src), name, json.dumps(opts), str(groups), str(data),
                        slice_key], capture_output=True, text=True, cwd=src, timeout=1200)
    if r.returncode != 0:
        raise RuntimeError(f"{src} {name}: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--groups", type=int, default=3)
    ap.add_argument("--data", type=Path, default=rollouts_path())
    ap.add_argument("--out", default=str(RESULTS / "shape_replay"))
    a = ap.parse_args()
    results = []
    for name, before_opts, after_opts in CASES:
        b = run(a.before, name, before_opts, a.groups, a.data, "backend")
        f = run(a.after, name, after_opts, a.groups, a.data, "judge")
        results.append({"scorer": name, "options_before": before_opts, "options_after": after_opts,
                        "identical": b == f, "before": b, "after": f})
        print(f"{name} {after_opts}: {'identical' if b == f else 'DIFFERENT'}", flush=True)
    lines = ["# Issue 10: scorer logic before and after, replayed against a deterministic judge\n",
             f"{a.groups} groups of {rel_path(a.data)}; judge outputs are a function of the prompt text (SHA-256).\n",
             "| scorer | options (after) | rows identical (ids, rewards, statuses, judge calls, tokens) |", "|---|---|---|"]
    lines += [f"| {r['scorer']} | {r['options_after']} | {r['identical']} |" for r in results]
    lines += ["", f"Command: `PYTHONPATH=. python benchmarks/shape_replay.py BEFORE_SRC AFTER_SRC --groups {a.groups}` "
              "(BEFORE_SRC / AFTER_SRC: `git archive` of the commits before and after).", ""]
    Path(f"{a.out}.md").write_text("\n".join(lines))
    Path(f"{a.out}.json").write_text(json.dumps({"command": f"PYTHONPATH=. python benchmarks/shape_replay.py "
                                                 f"BEFORE_SRC AFTER_SRC --groups {a.groups}", "results": results}, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
