"""ProcessBench with GAR's slice discriminator: per-split ProcessBench metric and step-level P/R.

Default: the embedded SmolLM2-135M in verdict-logit mode (P(YES), one forward pass per unit) on a balanced
subset of LIMIT rows per split, judged twice: each labelled step as a slice ("steps") and GAR re-slicing of
the joined steps ("reslice"). Writes benchmarks/results/<name>.json and .md.

    PYTHONPATH=. python benchmarks/processbench_eval.py                       # subset, CPU, minutes
    PYTHONPATH=. python benchmarks/processbench_eval.py --limit 0 --judge deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B \
        --device cuda --dtype bfloat16 --batch-size 64 --name processbench_full    # full run, GPU
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import rewardkit  # noqa: E402

if str(ROOT) not in rewardkit.__path__:  # this checkout's evals/ as rewardkit.evals (as conftest.py does)
    rewardkit.__path__.append(str(ROOT))

from rewardkit.evals.processbench import SPLITS, format_table, predictions_to_rows, run_processbench  # noqa: E402

from rewardkit.backends import load_backend  # noqa: E402
from rewardkit.gar.slices import SliceScorer  # noqa: E402

ANCHORS = """Published anchors: the ProcessBench paper (Zheng et al., arXiv:2412.06559, Table 3) lists per-split
accuracy on erroneous / correct samples and F1 for PRMs and prompted critic models. Those figures are not
stated in the papers or data README shipped with this repository, so they are not copied here; compare
against Table 3 of the paper (or the Qwen/ProcessBench README) directly. Note that the published critics see
the whole solution at once, whereas here each unit is judged on its own (context off) unless --context."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=4, help="rows per split (balanced); 0 = all")
    ap.add_argument("--splits", nargs="+", default=list(SPLITS))
    ap.add_argument("--units", nargs="+", default=["steps", "reslice"], choices=["steps", "reslice"])
    ap.add_argument("--judge", default="smollm2", help="judge backend spec")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--mode", default="logit", choices=["logit", "generate"])
    ap.add_argument("--context", action="store_true", help="show earlier steps as context")
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="processbench")
    a = ap.parse_args()
    limit = a.limit or None
    judge = load_backend(a.judge, device=a.device, dtype=a.dtype, batch_size=a.batch_size)
    scorer = SliceScorer(judge=judge, mode=a.mode, threshold=a.threshold, context=a.context)
    runs, md = {}, [f"# ProcessBench: GAR slice discriminator ({a.judge}, {a.mode} mode)\n"]
    for unit in a.units:
        t0 = time.perf_counter()
        summary, preds = run_processbench(scorer, a.splits, limit, unit, seed=a.seed)
        dt = time.perf_counter() - t0
        n_units = sum(len(p.verdicts) for p in preds)
        runs[unit] = {"seconds": dt, "units": n_units, "summary": summary, "predictions": predictions_to_rows(preds)}
        md += [f"## unit = {unit}: {len(preds)} solutions, {n_units} units judged in {dt:.0f} s\n",
               format_table(summary), ""]
        print(md[-2], flush=True)
    config = {k: v for k, v in vars(a).items()} | {"model_id": judge.model_id}
    md += ["Accuracies, F1, precision and recall in %. `NO precision/recall`: the discriminator's NO verdicts as "
           "detections of erroneous units, over units with a human label (units before the earliest error are "
           "correct, the unit holding it is wrong, later units are unlabelled). AUROC: 1 - P(YES) as an error "
           "score over the same units (threshold-free).\n",
           f"Reproduce: `{' '.join(['PYTHONPATH=. python benchmarks/processbench_eval.py', *sys.argv[1:]])}`\n",
           f"Config: `{json.dumps(config)}`\n", ANCHORS, ""]
    out = ROOT / "benchmarks" / "results" / a.name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"config": config, "runs": runs}, indent=1, default=str))
    out.with_suffix(".md").write_text("\n".join(md))
    print(f"wrote {out}.md / .json")


if __name__ == "__main__":
    main()
