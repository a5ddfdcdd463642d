"""Answer verdicts against labels: rewardkit (``extract_answer`` + ``AnswerChecker``) and math-verify's default
``parse`` + ``verify`` on the same labelled (gold, response) pairs of ``tests/fixtures/equivalence_cases.json``
(math-verify's and NeMo-Skills' own test cases; see benchmarks/derive_equivalence_cases.py).

Agreement is the share of cases whose verdict equals the label; cases labelled under non-default equality
settings are left out. ``development``: the cases looked at while changing rewardkit's extraction;
``held-out``: math-verify's tests on real model outputs (numina, open_thoughts, yujianll) and NeMo-Skills'
``test_math_equal`` pairs; ``real outputs``: the shared rollouts and ProcessBench solutions with labels.
``--baseline NAME=FILE`` keeps rewardkit's agreement from an earlier run's JSON as a column (carried over
when the script is run again).

    python benchmarks/answer_parity.py [--baseline NAME=FILE ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, ROOT, machine, write_results  # noqa: E402
from rewardkit.evals.data import answer_pairs  # noqa: E402

from rewardkit.answers import AnswerChecker, extract_answer, math_verify_default  # noqa: E402

CASES = ROOT / "tests" / "fixtures" / "equivalence_cases.json"
SPLITS = ("development", "held-out", "real outputs")


def load_cases() -> list[dict]:
    """The labelled cases whose label holds under math-verify's default equality settings."""
    return [c for c in json.loads(CASES.read_text())["cases"] if not c["settings"]]


def rewardkit_verdicts(cases: list[dict]) -> list[bool]:
    checker = AnswerChecker(mode="inline")
    try:
        return [bool(c.equivalent) for c in checker.check_many([(x["gold"], extract_answer(x["response"])) for x in cases])]
    finally:
        checker.close()


def _agreement(rows: list[dict], key: str) -> float:
    return sum(r[key] == r["label"] for r in rows) / len(rows)


def main(baselines: list[str]) -> None:
    cases = load_cases()
    real = [{"id": pid, "gold": g, "response": t, "label": lab, "split": "real outputs"}
            for pid, g, t, lab in answer_pairs() if lab is not None]
    cases = cases + real
    ours = rewardkit_verdicts(cases)
    theirs = [math_verify_default(c["gold"], c["response"]) for c in cases]
    rows = [{"id": c["id"], "split": c["split"], "label": c["label"], "rewardkit": o, "math_verify": m}
            for c, o, m in zip(cases, ours, theirs, strict=True)]
    old = RESULTS / "answer_parity.json"
    kept = json.loads(old.read_text()).get("baselines", {}) if old.exists() else {}
    for spec in baselines:  # NAME=FILE: rewardkit's agreement per split in an earlier run's JSON, kept from then on
        name, path = spec.split("=", 1)
        prev = json.loads(Path(path).read_text())
        if "splits" in prev:  # a run of this script
            kept[name] = {split: e["rewardkit"] for split, e in prev["splits"].items()}
        else:  # per-case verdicts of another run
            kept[name] = {split: _agreement([r for r in prev["cases"] if r["split"] == split], "rewardkit")
                          for split in SPLITS if any(r["split"] == split for r in prev["cases"])}
    splits = {}
    for split in SPLITS:
        sel = [r for r in rows if r["split"] == split]
        splits[split] = {"cases": len(sel), "rewardkit": _agreement(sel, "rewardkit"),
                         "math_verify": _agreement(sel, "math_verify"),
                         "rewardkit_wrong_where_math_verify_right": sorted(
                             r["id"] for r in sel if r["rewardkit"] != r["label"] and r["math_verify"] == r["label"]),
                         "by_source": dict(Counter(r["id"].split(":")[0] if ":" in r["id"] else r["id"].split("-")[0]
                                                   for r in sel))}
    # every case whose verdicts are not all equal to its label (the rest agree everywhere)
    data = {"cases_file": "tests/fixtures/equivalence_cases.json", "splits": splits, "baselines": kept,
            "cases_not_all_agreeing": [r for r in rows if not r["rewardkit"] == r["math_verify"] == r["label"]],
            "machine": machine()}
    names = list(kept)
    lines = ["# Answer verdicts vs labels: rewardkit and math-verify's default", "",
             "`python benchmarks/answer_parity.py`: rewardkit's verdict (`extract_answer` + `AnswerChecker`) and "
             "math-verify's default `parse` + `verify` on the same labelled (gold, response) pairs. Agreement = share "
             "of verdicts equal to the label.", "",
             "- development: math-verify's `tests/test_all.py`, `test_boxed.py`, `test_strict.py` cases (looked at "
             "while changing rewardkit's extraction);",
             "- held-out: math-verify's tests on real model outputs (`test_numina_cases.py`, `test_open_thoughts.py`, "
             "`test_yujianll.py`) and NeMo-Skills' `tests/test_math_equal.py` pairs in both orders;",
             "- real outputs: the 800 shared rollouts (upstream grader's labels) and the ProcessBench gsm8k/math "
             "solutions whose gold is known (`final_answer_correct`).", "",
             "Cases from `tests/fixtures/equivalence_cases.json` (derived with attribution by "
             "`benchmarks/derive_equivalence_cases.py`); cases labelled under non-default equality settings are left "
             "out. Earlier rewardkit columns: " + (", ".join(f"`{n}`" for n in names) or "none") + ".", "",
             "| split | cases | " + "".join(f"rewardkit {n} | " for n in names) + "rewardkit | math-verify default |",
             "|---|---|" + "---|" * len(names) + "---|---|"]
    for split, e in splits.items():
        cols = "".join(f"{kept[n][split]:.3f} | " if split in kept[n] else "- | " for n in names)
        lines.append(f"| {split} | {e['cases']} | {cols}{e['rewardkit']:.3f} | {e['math_verify']:.3f} |")
    lines.append("")
    for split, e in splits.items():
        worse = e["rewardkit_wrong_where_math_verify_right"]
        lines.append(f"- {split}: rewardkit wrong where math-verify is right on {len(worse)} case(s)"
                     + (": " + ", ".join(f"`{w}`" for w in worse) if worse else "") + ".")
    write_results("answer_parity", data, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", action="append", default=[], help="NAME=FILE: an earlier run's JSON to keep as a column")
    main(ap.parse_args().baseline)
