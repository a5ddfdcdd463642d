"""Answer verdicts against labels: rewardkit (``extract_answer`` + ``AnswerChecker``) and math-verify's default
``parse`` + ``verify``, both given the same (gold, response) texts prepared the same way.

Cases: the labelled pairs of ``tests/fixtures/equivalence_cases.json`` (math-verify's and NeMo-Skills' own test
cases, derived with attribution by benchmarks/derive_equivalence_cases.py; those labelled under non-default
equality settings are left out) and the shared data's real (gold, response) pairs with a label.

Preparation, one for both checkers (issue 34: math-verify used to get the gold wrapped and a bare answer raw):
``latex`` (the reported one) wraps every answer string in ``$...$`` unless it holds a LaTeX environment or a box
(``rewardkit.answers.latex_answer``, NeMo-Skills' rule): both sides of a labelled pair, the gold of a real pair,
whose response is a whole response and stays as written. ``raw`` (both sides as written) and ``former`` (the
protocol of earlier runs: rewardkit on raw texts, math-verify on the wrapped gold and the raw response) are
shown beside it.

Splits, by source file (``derive_equivalence_cases.HELD_OUT``): development = math-verify's test_all.py,
test_boxed.py, test_strict.py and test_open_thoughts.py; held-out = math-verify's test_numina_cases.py and
test_yujianll.py and NeMo-Skills' test_math_equal.py, frozen: their digest is ``FROZEN_HELD_OUT`` and the commit
that froze them is the first one holding it; real outputs = the shared rollouts and ProcessBench solutions.

    python benchmarks/answer_parity.py
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, machine, write_results  # noqa: E402
from derive_equivalence_cases import HELD_OUT  # noqa: E402
from rewardkit.evals.data import answer_pairs  # noqa: E402

from rewardkit.answers import AnswerChecker, extract_answer, latex_answer, math_verify_default  # noqa: E402

CASES = ROOT / "tests" / "fixtures" / "equivalence_cases.json"
SPLITS = ("development", "held-out", "real outputs")
PREPARATIONS = ("latex", "raw", "former")
# sha256 of the held-out cases (``held_out_digest``); the commit that first holds this line froze the split:
# no change to rewardkit's extraction or equivalence may be made looking at these cases from then on
FROZEN_HELD_OUT = "8ca956ab8c07fc11f34ab1866aa81b7793e02381c9e3e6cd5dec320db5a5e062"


def load_cases() -> list[dict]:
    """The labelled cases whose label holds under math-verify's default equality settings, then the real ones."""
    labelled = [c for c in json.loads(CASES.read_text())["cases"] if not c["settings"]]
    real = [{"id": pid, "gold": g, "response": t, "label": lab, "split": "real outputs"}
            for pid, g, t, lab in answer_pairs() if lab is not None]
    return labelled + real


def held_out_digest(cases: list[dict]) -> str:
    """sha256 of the held-out cases' (id, gold, response, label), in id order: any change to the split shows."""
    rows = sorted((c["id"], c["gold"], c["response"], c["label"]) for c in cases if c["split"] == "held-out")
    return hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode()).hexdigest()


def frozen_at(digest: str) -> str | None:
    """The first commit whose ``benchmarks/answer_parity.py`` holds ``digest`` (None before it is committed)."""
    out = subprocess.run(["git", "log", "-S", digest, "--reverse", "--format=%h", "--", "benchmarks/answer_parity.py"],
                         cwd=ROOT, capture_output=True, text=True).stdout.split()
    return out[0] if out else None


def prepared(case: dict, how: str) -> tuple[str, str, str, str]:
    """(gold, response) for rewardkit, then for math-verify, under preparation ``how``."""
    g, r = case["gold"], case["response"]
    if how == "raw":
        return g, r, g, r
    if how == "former":
        return g, r, latex_answer(g), r
    r = r if case["split"] == "real outputs" else latex_answer(r)  # a whole response stays as written
    return latex_answer(g), r, latex_answer(g), r


def verdicts(cases: list[dict], how: str) -> tuple[list[bool], list[bool]]:
    """rewardkit's and math-verify's verdict on every case under preparation ``how``."""
    texts = [prepared(c, how) for c in cases]
    checker = AnswerChecker(mode="inline")
    try:
        ours = [bool(v.equivalent) for v in checker.check_many([(g, extract_answer(r)) for g, r, _, _ in texts])]
    finally:
        checker.close()
    return ours, [math_verify_default(g, r) for _, _, g, r in texts]


def _short(s: str, n: int = 70) -> str:
    s = " ".join(s.split()).replace("|", "\\|").replace("`", "'")
    return s if len(s) <= n else s[: n - 3] + "..."


def main() -> None:
    cases = load_cases()
    digest = held_out_digest(cases)
    if digest != FROZEN_HELD_OUT:
        raise SystemExit(f"the frozen held-out split changed (digest {digest}, frozen {FROZEN_HELD_OUT})")
    results = {how: verdicts(cases, how) for how in PREPARATIONS}
    rows = [{"id": c["id"], "split": c["split"], "label": c["label"],
             **{f"{name}_{how}": v[k][i] for how, v in results.items() for k, name in enumerate(("rewardkit", "math_verify"))}}
            for i, c in enumerate(cases)]
    splits = {}
    for split in SPLITS:
        sel = [r for r in rows if r["split"] == split]
        e: dict = {"cases": len(sel)}
        for how in PREPARATIONS:
            for name in ("rewardkit", "math_verify"):
                e[f"{name}_{how}"] = sum(r[f"{name}_{how}"] == r["label"] for r in sel) / len(sel)
        for how in PREPARATIONS:  # cases lost (verdict != label) by one checker only, or by both
            rk, mv = ([r[f"{n}_{how}"] == r["label"] for r in sel] for n in ("rewardkit", "math_verify"))
            e[f"losses_{how}"] = {"rewardkit_only": sum(m and not k for k, m in zip(rk, mv, strict=True)),
                                  "math_verify_only": sum(k and not m for k, m in zip(rk, mv, strict=True)),
                                  "both": sum(not k and not m for k, m in zip(rk, mv, strict=True))}
        splits[split] = e
    by_id = {c["id"]: c for c in cases}
    losses = [r for r in rows if not r["rewardkit_latex"] == r["math_verify_latex"] == r["label"]]
    commit = frozen_at(digest)
    data = {"cases_file": "tests/fixtures/equivalence_cases.json", "preparation": "latex", "splits": splits,
            "held_out": {"rule": "by source file: math-verify tests/test_numina_cases.py, tests/test_yujianll.py; "
                                 "NeMo-Skills tests/test_math_equal.py", "sources": sorted(HELD_OUT),
                         "cases": splits["held-out"]["cases"], "digest": digest, "frozen_at": commit},
            "losses_latex": [{**r, "gold": by_id[r["id"]]["gold"], "response": by_id[r["id"]]["response"][:300]}
                             for r in losses],
            "machine": machine()}
    lines = [
        "# Answer verdicts vs labels: rewardkit and math-verify's default, prepared alike", "",
        "`python benchmarks/answer_parity.py`: rewardkit's verdict (`extract_answer` + `AnswerChecker`) and "
        "math-verify's default `parse` + `verify` on the same labelled (gold, response) pairs, each given the "
        "same texts. Agreement = share of verdicts equal to the label.", "",
        "Preparation (the same for both checkers): `latex` wraps an answer string in `$...$` unless it holds a "
        "LaTeX environment or a box (`rewardkit.answers.latex_answer`, NeMo-Skills' `math_equal` rule): both "
        "sides of a labelled pair, the gold of a real pair (its response is a whole response, kept as written). "
        "`raw`: every text as written. `former`: earlier runs' protocol, unequal (rewardkit on raw texts; "
        "math-verify on the wrapped gold and the raw response, so a bare answer such as NeMo-Skills' `A` was "
        "parsed by its whole-response parser).", "",
        "Splits, by source file (`benchmarks/derive_equivalence_cases.py`, `HELD_OUT`):",
        "- development: math-verify's `tests/test_all.py`, `test_boxed.py`, `test_strict.py` and "
        "`test_open_thoughts.py` (a rule of commit 318257f cites it);",
        "- held-out: math-verify's `tests/test_numina_cases.py`, `test_yujianll.py` and NeMo-Skills' "
        "`tests/test_math_equal.py` pairs in both orders, **frozen at commit "
        + (f"`{commit}`" if commit else "(not yet committed)") + f"** (sha256 `{digest[:16]}...` of its "
        f"{splits['held-out']['cases']} cases, `FROZEN_HELD_OUT`; the run stops if they change). They were in "
        "view once before the freeze, in 1ff0004 (issue 21), so these numbers are not a clean first look; "
        "from the freeze on no commit may change rewardkit's extraction or equivalence looking at them;",
        "- real outputs: the 800 shared rollouts (upstream grader's labels) and the ProcessBench gsm8k/math "
        "solutions whose gold is known (`final_answer_correct`); looked at (their differences from math-verify "
        "are listed in `tests/fixtures/answer_vs_math_verify.json`).", "",
        "| split | cases | rewardkit (latex) | math-verify (latex) | rewardkit (raw) | math-verify (raw) "
        "| rewardkit (former) | math-verify (former) |",
        "|---|---|---|---|---|---|---|---|"]
    for split, e in splits.items():
        lines.append(f"| {split} | {e['cases']} | " + " | ".join(
            f"{e[f'{n}_{h}']:.3f}" for h in PREPARATIONS for n in ("rewardkit", "math_verify")) + " |")
    lines += ["", "Losses per checker (a case lost = the verdict differs from the label):", "",
              "| split | preparation | lost by rewardkit only | lost by math-verify only | lost by both |",
              "|---|---|---|---|---|"]
    for split, e in splits.items():
        for how in PREPARATIONS:
            lo = e[f"losses_{how}"]
            lines.append(f"| {split} | {how} | {lo['rewardkit_only']} | {lo['math_verify_only']} | {lo['both']} |")
    lines += ["", "Every lost case under `latex`:", "",
              "| split | case | gold | response | label | rewardkit | math-verify |", "|---|---|---|---|---|---|---|"]
    for r in losses:
        c = by_id[r["id"]]
        lines.append(f"| {r['split']} | `{r['id']}` | `{_short(c['gold'], 40)}` | `{_short(c['response'])}` | "
                     f"{r['label']} | {r['rewardkit_latex']} | {r['math_verify_latex']} |")
    held = [r for r in rows if r["split"] == "held-out"
            and not all(r[f"{n}_{h}"] == r["label"] for n in ("rewardkit", "math_verify") for h in PREPARATIONS)]
    lines += ["", "Held-out cases lost under any preparation (rewardkit / math-verify, True = equivalent):", "",
              "| case | gold | response | label | latex | raw | former |", "|---|---|---|---|---|---|---|"]
    for r in held:
        c = by_id[r["id"]]
        lines.append(f"| `{r['id']}` | `{_short(c['gold'], 40)}` | `{_short(c['response'], 40)}` | {r['label']} | "
                     + " | ".join(f"{r[f'rewardkit_{h}']} / {r[f'math_verify_{h}']}" for h in PREPARATIONS) + " |")
    write_results("answer_parity", data, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
