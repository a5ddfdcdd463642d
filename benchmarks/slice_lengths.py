"""GAR slice-length distribution on real traces: pieces merged up to L = 320 or a clear new beginning, under
rewardkit's rule (a new beginning closes a slice only once it holds 3/4 L: rewardkit's threshold, the paper
gives none), the paper's words taken literally (every new beginning closes the slice) and the earlier
80-token early close. L is enforced on each slice's own token count; the table says how many slices exceed
it (only a single protected block longer than L may).

Tokens are counted with the embedded discriminator's tokenizer (SmolLM2). Traces: the 800 shared
Qwen2.5-Math rollouts and the ProcessBench solutions (steps joined by blank lines; longer traces).

    PYTHONPATH=. python benchmarks/slice_lengths.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, rollouts_path, write_results  # noqa: E402
from rewardkit.evals.data import shared_dir  # noqa: E402

from rewardkit.gar.slicing import slice_text  # noqa: E402

L = 320
RULES = {"rewardkit (a new beginning closes from 3/4 L)": None,
         "paper's words (every new beginning closes)": 0,
         "earlier rewardkit (a new beginning closes from 80)": 80}


def traces() -> dict[str, list[str]]:
    rows = [json.loads(x) for x in rollouts_path().read_text().splitlines()]
    out = {"shared rollouts (800)": [t for r in rows for t in r["responses"]]}
    pb = shared_dir() / "data" / "processbench"
    sols = [("\n\n".join(json.loads(x)["steps"])) for f in ("olympiadbench.jsonl", "omnimath.jsonl")
            for x in (pb / f).read_text().splitlines()[:200]]
    out["ProcessBench olympiad+omnimath (400)"] = sols
    return out


def main() -> None:
    from transformers import AutoTokenizer

    from rewardkit.backends.embedded import embedded_model_path

    tok = AutoTokenizer.from_pretrained(str(embedded_model_path()))

    def count(texts):
        return [len(ids) for ids in tok(list(texts), add_special_tokens=False)["input_ids"]]

    res = {"L": L, "tokenizer": "SmolLM2-135M-Instruct", "sets": {}, "machine": machine()}
    for name, ts in traces().items():
        lengths = count(ts)
        res["sets"][name] = {"traces": len(ts), "trace_tokens_median": float(np.median(lengths)), "rules": {}}
        for rule, mt in RULES.items():
            sl = [slice_text(t, L, count, mt) for t in ts]
            closed = np.array([s.tokens for x in sl for s in x[:-1]])
            allt = np.array([s.tokens for x in sl for s in x])
            real = np.array(count([s.text for x in sl for s in x]))  # re-tokenised, as the judge will see it
            res["sets"][name]["rules"][rule] = {
                "over_L_real_count": int((real > L).sum()), "max_real_count": int(real.max()),
                "slices_per_trace": float(np.mean([len(x) for x in sl])),
                "closed_slices": int(len(closed)),
                "closed_p10_p50_p90": [float(v) for v in np.percentile(closed, [10, 50, 90])] if len(closed) else None,
                "all_p10_p50_p90": [float(v) for v in np.percentile(allt, [10, 50, 90])],
            }
    md = [f"# GAR slice lengths (L = {L}, {res['tokenizer']} tokens)", "",
          "Command: `PYTHONPATH=. python benchmarks/slice_lengths.py`. Closed slices exclude each trace's last slice",
          "(the remainder); percentiles are p10 / median / p90 in tokens. The 3/4 L threshold is rewardkit's",
          "(the paper merges pieces \"until a clear new beginning or the token budget L\" and gives no minimum).",
          "Over L: slices whose text, re-tokenised, holds more than L tokens (before issue 21 the budget was",
          "checked on summed segment counts and about 3% of slices exceeded L = 320, up to 330).", "",
          "| traces | rule | slices per trace | closed slices | closed p10 / p50 / p90 | all p10 / p50 / p90 | over L (max) |",
          "|---|---|---:|---:|---|---|---|"]
    for name, d in res["sets"].items():
        for rule, r in d["rules"].items():
            c = " / ".join(f"{v:.0f}" for v in r["closed_p10_p50_p90"]) if r["closed_p10_p50_p90"] else "-"
            a = " / ".join(f"{v:.0f}" for v in r["all_p10_p50_p90"])
            md.append(f"| {name} (median trace {d['trace_tokens_median']:.0f} tokens) | {rule} | "
                      f"{r['slices_per_trace']:.2f} | {r['closed_slices']} | {c} | {a} | "
                      f"{r['over_L_real_count']} ({r['max_real_count']}) |")
    write_results("slice_lengths", res, "\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
