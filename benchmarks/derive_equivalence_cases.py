"""Derive labelled (gold, response) equivalence cases from two public test suites into
``tests/fixtures/equivalence_cases.json`` (data only, with attribution; no code of theirs is copied):

- math-verify (huggingface/Math-Verify, Apache-2.0): every ``@pytest.mark.parametrize`` row of its tests
  with a gold, a prediction and an expected 0/1, and the test's extraction settings;
- NeMo-Skills (NVIDIA/NeMo-Skills, Apache-2.0): the pairs of ``tests/test_math_equal.py``, each in both
  orders as that test checks them (equal pairs label 1, unequal 0; a pair holding None is left out).

A case whose label was decided under non-default equality settings (another float precision, non-strict
variables, set/relation comparison) keeps them in ``settings``: ``benchmarks/answer_parity.py`` leaves those
out of agreement numbers, since math-verify's default would label them otherwise.

    python benchmarks/derive_equivalence_cases.py MATH_VERIFY_GIT_DIR NEMO_SKILLS_GIT_DIR
"""

from __future__ import annotations

import ast
import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "equivalence_cases.json"
MV_FILES = ("tests/test_all.py", "tests/test_boxed.py", "tests/test_strict.py", "tests/test_numina_cases.py",
            "tests/test_open_thoughts.py", "tests/test_yujianll.py")
# The split, by source file (issue 34): held out are math-verify's tests on real model outputs that no rewardkit
# rule cites, and NeMo-Skills' pairs; test_open_thoughts.py is development since 318257f's rule cites it.
# benchmarks/answer_parity.py freezes the held-out cases (their digest) and names the commit that froze them.
HELD_OUT = {"tests/test_numina_cases.py", "tests/test_yujianll.py", "tests/test_math_equal.py"}
DEFAULTS = {"precision": 6, "strict": True, "allow_set_relation_comp": False}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(repo), *args], check=True, capture_output=True, text=True).stdout


def _literal(node: ast.AST) -> object:
    """A parametrize value: a literal, or an f-string over ``math`` (one row of test_all.py is one)."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        return eval(compile(ast.Expression(node), "<case>", "eval"), {"__builtins__": {}, "math": math})  # noqa: S307


def _call_settings(fn: ast.FunctionDef) -> dict:
    """The keyword settings the test passes to its comparison helper (constants only)."""
    out = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg and isinstance(kw.value, ast.Constant | ast.List):
                    out[kw.arg] = ast.literal_eval(kw.value)
    return out


def math_verify_cases(repo: Path) -> list[dict]:
    commit = _git(repo, "rev-parse", "HEAD").strip()
    cases = []
    for path in MV_FILES:
        tree = ast.parse(_git(repo, "show", f"HEAD:{path}"))
        for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
            for dec in fn.decorator_list:
                if not (isinstance(dec, ast.Call) and getattr(dec.func, "attr", "") == "parametrize"):
                    continue
                names = [n.strip() for n in ast.literal_eval(dec.args[0]).split(",")]
                if "gold" not in names:
                    continue
                call = _call_settings(fn)
                for i, row in enumerate(dec.args[1].elts):
                    values = dict(zip(names, [_literal(e) for e in row.elts], strict=True))
                    settings = {k: values.get(k, call.get(k, v)) for k, v in DEFAULTS.items()}
                    label = values.get("expected", values.get("result"))
                    cases.append({
                        "id": f"mv:{Path(path).stem}:{fn.name}:{i}",
                        "gold": values["gold"], "response": values["pred"], "label": bool(label),
                        "split": "held-out" if path in HELD_OUT else "development",
                        "match_types": call.get("match_types", ["latex", "expr"]),
                        "settings": {k: v for k, v in settings.items() if v != DEFAULTS[k]},
                        "source": {"repo": "huggingface/Math-Verify", "commit": commit, "path": path, "test": fn.name},
                    })
    return cases


def nemo_skills_cases(repo: Path) -> list[dict]:
    path = "tests/test_math_equal.py"
    commit = _git(repo, "log", "-1", "--format=%H", "--", path).strip()
    tree = ast.parse(_git(repo, "show", f"HEAD:{path}"))
    cases = []
    for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
        label = {"test_correct_examples": True, "test_incorrect_examples": False}.get(fn.name)
        for dec in fn.decorator_list if label is not None else []:
            if isinstance(dec, ast.Call) and getattr(dec.func, "attr", "") == "parametrize":
                for i, row in enumerate(dec.args[1].elts):
                    a, b = (_literal(e) for e in row.elts)
                    if a is None or b is None:
                        continue
                    for k, (gold, resp) in enumerate(((a, b), (b, a))):
                        cases.append({
                            "id": f"nemo:{fn.name}:{i}:{'ab'[k]}", "gold": str(gold), "response": str(resp),
                            "label": label, "split": "held-out" if path in HELD_OUT else "development",
                            "match_types": ["latex", "expr"], "settings": {},
                            "source": {"repo": "NVIDIA/NeMo-Skills", "commit": commit, "path": path, "test": fn.name},
                        })
    return cases


def main(mv_repo: str, nemo_repo: str) -> None:
    cases = math_verify_cases(Path(mv_repo)) + nemo_skills_cases(Path(nemo_repo))
    doc = {
        "about": "Labelled (gold, response) answer-equivalence cases derived from public test suites (data only): "
                 "huggingface/Math-Verify tests (Apache-2.0) and NVIDIA/NeMo-Skills tests/test_math_equal.py "
                 "(Apache-2.0). Produced by benchmarks/derive_equivalence_cases.py; each case names its source "
                 "file, test and commit. 'settings' lists non-default equality settings its label was decided "
                 "under (such cases are left out of agreement numbers). 'split': development (looked at while "
                 "changing rewardkit's extraction) or held-out (measured only), by source file: held out are "
                 "math-verify's test_numina_cases.py and test_yujianll.py and NeMo-Skills' test_math_equal.py.",
        "cases": cases,
    }
    OUT.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(cases)} cases -> {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
