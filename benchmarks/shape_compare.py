"""Issue 10's proof that one scorer shape left behaviour unchanged: compare score rows before and after.

The rows come from `rewardkit score` (and `rewardkit tts`) on the shared rollouts math_cot_100.jsonl, run
once on the commit before the change and once after (embedded judge smollm2, verdict-logit mode,
``--limit 2`` for the judge scorers, all 100 groups for verifier / majority-vote / proof-gate):

    # before (a checkout of the old commit), for each scorer S:
    rewardkit score DATA --scorer S [--limit 2 --judge smollm2 -o mode=logit|logits] --out BEFORE/S.jsonl
    rewardkit tts DATA --limit 3 --n 2,4 --no-skip-uniform --backend smollm2 --mode logits --out BEFORE/tts
    # after: the same with the new spellings (slices: --judge; critic, llm-judge: mode=logit;
    # tts: --judge smollm2 --mode logit --prompt critic)
    PYTHONPATH=. python benchmarks/shape_compare.py BEFORE AFTER [AFTER2 ...]

Per scorer it checks ids, rewards (to 1e-9), statuses and messages, and lists every other field that
changed; the differences the issue names as fixes are labelled. Writes benchmarks/results/shape_compare.*.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from _common import RESULTS  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

# field -> why it changed (issue 10 fixes); anything not listed here that differs is reported as unexplained
EXPLAINED = {
    "stats": "new field: per-group values moved out of components (components hold per-response arrays only)",
    "components": "per-group scalars moved to stats; per-response arrays unchanged",
    "cost.verifier_calls": "now counts checks actually run; answers served from the answer cache count as cache_hits",
    "cost.cache_hits": "now also counts verifier answers served from the answer cache (was: judge cache only)",
}
# changed by other work that landed between the two runs (not issue 10); the logic replay
# (benchmarks/shape_replay.py) shows the scorers give identical rows for identical judge outputs
OTHER = {
    "correct": "the score command now copies the input labels into each row (issue 12)",
    "scorer": "the score command now names the scorer in each row (issue 12)",
    "rewards (judge scorers)": "the embedded judge's verdict probabilities moved by about 1e-2 (backend changes, "
                               "issue 12: transformers backend batching and dtype); the replay is identical",
    "critic_probs": "the same judge numerics",
    "matches": "the same judge numerics (tournament soft outcomes)",
    "verdicts": "the same judge numerics (tournament soft outcomes)",
    "first_shown_outcomes": "the same judge numerics (tournament soft outcomes)",
    "bt_strengths": "the same judge numerics (Bradley-Terry fit on the soft outcomes)",
    "cost.prompt_tokens": "arena's live schedule picks later opponents from earlier outcomes, so the judge numerics "
                          "change which pairs are judged (same 18 calls per group, other prompts)",
    "verifications": "judge numerics (llm-judge p(True)); and group 003 below",
    "group 003 (verifier rewards/statuses, proof-gate gate)": "math-verify on '4:30p..' vs '4:30 \\text{ p.m.}' "
        "takes about 4 s on the shared machine under load (timed: 4.2 s with the old code), so it hit the 5 s "
        "deadline in the after runs (status timeout, gate inconclusive) and not in the before run (refuted)",
    "slices": "per-slice P(YES) numerics (rewards equal: every slice stays on the same side of the threshold)",
    "components->stats values": "a value in the moved per-group numbers changed, for the reasons above",
}


def _rows(path: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in map(json.loads, path.read_text().splitlines()) if r.get("id")}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=0, abs_tol=1e-9) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def compare_scores(before: Path, after: Path) -> dict[str, Any]:
    b, a = _rows(before), _rows(after)
    out: dict[str, Any] = {"groups": len(b), "ids_equal": list(b) == list(a), "rewards_equal": True,
                           "statuses_equal": True, "messages_equal": True, "changed_fields": {}}
    for gid in b.keys() & a.keys():
        rb, ra = b[gid], a[gid]
        out["rewards_equal"] &= _same(rb["rewards"], ra["rewards"])
        out["statuses_equal"] &= rb["statuses"] == ra["statuses"]
        out["messages_equal"] &= rb.get("messages") == ra.get("messages")
        for k in sorted((rb.keys() | ra.keys()) - {"id", "rewards", "statuses", "messages", "cost"}):
            if not _same(rb.get(k), ra.get(k)):
                out["changed_fields"][k] = out["changed_fields"].get(k, 0) + 1
        for k in sorted(rb["cost"].keys() | ra["cost"].keys()):
            if k != "seconds" and rb["cost"].get(k) != ra["cost"].get(k):
                out["changed_fields"][f"cost.{k}"] = out["changed_fields"].get(f"cost.{k}", 0) + 1
        moved = {k: v for k, v in (rb.get("components") or {}).items() if k not in (ra.get("components") or {})}
        if moved and not _same(moved, {k: (ra.get("stats") or {}).get(k) for k in moved}):
            out["changed_fields"]["components->stats values"] = out["changed_fields"].get("components->stats values", 0) + 1
    out["unexplained"] = sorted(k for k in out["changed_fields"] if k not in EXPLAINED and k not in OTHER)
    return out


def compare_tts(before: Path, after: Path) -> dict[str, Any]:
    b, a = json.loads(before.read_text()), json.loads(after.read_text())
    return {"rows_equal": _same(b["rows"], a["rows"]), "match_status_equal": b.get("match_status") == a.get("match_status"),
            "judge_requests": [b["cost"].get("judge_calls"), a["cost"].get("judge_calls")],
            "settings_renamed": sorted(set(b["settings"]) ^ set(a["settings"]))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path, nargs="+", help="later folders win where several hold a scorer's rows")
    ap.add_argument("--out", default=str(RESULTS / "shape_compare"))
    args = ap.parse_args()
    after = {p.name: p for d in args.after for p in sorted(d.glob("*.jsonl"))} | \
            {p.name: p for d in args.after for p in d.glob("tts.json")}
    res: dict[str, Any] = {}
    for p in sorted(args.before.glob("*.jsonl")):
        if p.name in after:
            res[p.stem] = compare_scores(p, after[p.name])
        else:
            res[p.stem] = {"missing_after": True}
    if (args.before / "tts.json").exists() and "tts.json" in after:
        res["tts"] = compare_tts(args.before / "tts.json", after["tts.json"])
    lines = ["# Issue 10: score rows before and after the one-shape refactor\n",
             "| scorer | groups | ids | rewards | statuses | messages | other changed fields (rows) | unexplained |",
             "|---|---|---|---|---|---|---|---|"]
    for name, r in res.items():
        if r.get("missing_after"):
            lines.append(f"| {name} | - | not re-run | | | | | |")
        elif name == "tts":
            lines.append(f"| tts | - | - | rows equal: {r['rows_equal']} | match statuses equal: {r['match_status_equal']} "
                         f"| | settings renamed: {', '.join(r['settings_renamed'])} | |")
        else:
            ch = ", ".join(f"{k} ({v})" for k, v in r["changed_fields"].items()) or "-"
            lines.append(f"| {name} | {r['groups']} | {r['ids_equal']} | {r['rewards_equal']} | {r['statuses_equal']} "
                         f"| {r['messages_equal']} | {ch} | {', '.join(r['unexplained']) or '-'} |")
    lines += ["", "Explained differences (fixes named by issue 10):", ""]
    lines += [f"- `{k}`: {v}" for k, v in EXPLAINED.items()]
    lines += ["", "Other differences (work that landed between the runs, not issue 10):", ""]
    lines += [f"- `{k}`: {v}" for k, v in OTHER.items()]
    lines += ["", "Command: `PYTHONPATH=. python benchmarks/shape_compare.py BEFORE AFTER [AFTER2]` (see the "
              "module docstring for how the rows were produced).", ""]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(f"{args.out}.md").write_text("\n".join(lines))
    Path(f"{args.out}.json").write_text(json.dumps({"command": "PYTHONPATH=. python benchmarks/shape_compare.py "
                                                    "BEFORE AFTER [AFTER2]", "explained": EXPLAINED, "other": OTHER,
                                                    "results": res}, indent=1))
    print("\n".join(lines))
    sys.exit(1 if any(r.get("unexplained") for r in res.values()) else 0)


if __name__ == "__main__":
    main()
