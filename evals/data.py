"""Where the shared public data sets live: ``$REWARDKIT_SHARED``, else a ``shared/`` folder with ``data/``
beside this checkout or one of its parents (the layout CI and the developer machines use)."""

from __future__ import annotations

import os
from pathlib import Path

_HERE = Path(__file__).resolve()


def shared_dir() -> Path:
    """The shared folder; raises FileNotFoundError naming what to set when there is none."""
    if os.environ.get("REWARDKIT_SHARED"):
        return Path(os.environ["REWARDKIT_SHARED"])
    for parent in [Path.cwd(), *Path.cwd().parents, *_HERE.parents]:
        if (parent / "shared" / "data").is_dir():
            return parent / "shared"
    raise FileNotFoundError("cannot find the shared data folder (shared/data beside the checkout); set REWARDKIT_SHARED")


def data_path(*parts: str) -> Path:
    """A path inside ``shared/data``, e.g. ``data_path("processbench")``."""
    return shared_dir().joinpath("data", *parts)


def rollouts_path() -> Path:
    """The 100 x 8 Qwen2.5-Math rollouts with correctness labels."""
    return data_path("math_rollouts_qwen25", "math_cot_100.jsonl")


def answer_pairs() -> list[tuple[str, str, str, bool | None]]:
    """Real (id, gold, response, label) answer pairs from the shared data: the 800 rollouts (label: the upstream
    grader's), the ProcessBench gsm8k/math solutions whose problem is in GSM8K / MATH-500 (the gold comes from
    there; label: ProcessBench's ``final_answer_correct``), and the PRM800K samples' chosen steps (no label)."""
    import json

    def rows(*parts: str) -> list[dict]:
        return [json.loads(line) for line in data_path(*parts).open()]

    pairs: list[tuple[str, str, str, bool | None]] = []
    for r in rows("math_rollouts_qwen25", "math_cot_100.jsonl"):
        pairs += [(f"{r['id']}#{i}", r["answer"], t, bool(c)) for i, (t, c) in enumerate(zip(r["responses"], r["correct"], strict=True))]
    gold = {r["problem"].strip(): r["answer"] for r in rows("math500", "test.jsonl")}
    gold |= {r["question"].strip(): r["answer"] for r in rows("gsm8k", "test.jsonl")}
    for split in ("gsm8k", "math"):
        for r in rows("processbench", f"{split}.jsonl"):
            if r["problem"].strip() in gold:
                pairs.append((r["id"], gold[r["problem"].strip()], "\n\n".join(r["steps"]), bool(r["final_answer_correct"])))
    for r in rows("prm800k_sample", "samples.jsonl"):
        if r["question"].get("ground_truth_answer") is None:
            continue
        steps = []
        for s in r["label"]["steps"]:
            c = s["chosen_completion"]
            t = s["completions"][c]["text"] if c is not None else (s.get("human_completion") or {}).get("text")
            steps += [t] if t else []
        pairs.append((r["id"], r["question"]["ground_truth_answer"], "\n\n".join(steps), None))
    return pairs
