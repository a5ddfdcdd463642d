"""rewardkit's answer verdict against math-verify's default ``parse`` + ``verify`` on the same (gold, response)
pairs, both given the same texts prepared the same way (``latex_answer`` on every answer string; a whole response
as written): real outputs (shared rollouts, ProcessBench solutions with a known gold, PRM800K samples),
math-verify's documented behaviour, and labelled public cases (math-verify's own tests and NeMo-Skills'
``test_math_equal``, derived into ``fixtures/equivalence_cases.json`` by benchmarks/derive_equivalence_cases.py).
rewardkit is never worse; each pair where the two differ is listed with its reason in
``fixtures/answer_vs_math_verify.json``. The held-out split of the labelled cases is frozen (issue 34)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
from rewardkit.evals.data import answer_pairs, shared_dir

from rewardkit.answers import (
    AnswerChecker,
    extract_answer,
    latex_answer,
    math_verify_default,
    reference_problem,
)
from rewardkit.types import Status

FIXTURE = Path(__file__).parent / "fixtures" / "answer_vs_math_verify.json"
CASES = Path(__file__).parent / "fixtures" / "equivalence_cases.json"
LABELLED = ("mv:", "nemo:")  # fixture ids of the labelled public cases
try:
    DATA = shared_dir() / "data"
except FileNotFoundError:
    DATA = Path("/nonexistent")


def real_pairs() -> list[tuple[str, str, str]]:
    """(id, gold, response) of the shared data's real answer pairs (``rewardkit.evals.data.answer_pairs``)."""
    return [(pid, gold, text) for pid, gold, text, _ in answer_pairs()]


# math-verify's documented behaviour (its README and parser: answer sets of boxes joined by ","/"and"/"or",
# "final answer is", plain-text decimal commas, the last equation's right-hand side) and PRM800K's format
DOCUMENTED = [
    ("(1,2),(2,1)", r"The solutions are \boxed{(1,2)}, \boxed{(2,1)}"),
    ("(1,2),(2,1)", r"So \boxed{(1,2)} and \boxed{(2,1)}."),
    ("1,2", r"The roots are $\boxed{1}$ and $\boxed{2}$"),
    ("\\{1,2\\}", r"x = \boxed{1} or \boxed{2}"),
    ("1", r"\boxed{1} and \boxed{2}"),  # a set is not its first member (both: False)
    ("0.5", "The answer is 0,5"),
    ("1.5", "The final answer is 1,5."),
    ("3.14", "We get 3,14 in the end"),
    ("1000", r"\boxed{1,000}"),
    ("12", "Thus the total is 12 apples."),
    ("12", "So the final answer is $12$ apples"),
    ("x^2+1", "Final answer: $x^2+1$"),
    ("-\\frac{24}{25}", "Therefore, $\\cos \\angle RPS = -\\frac{24}{25}$."),
    ("\\frac{3}{4}", "So the area is $\\frac{3}{4}$ square units, from 3 and 4."),
    ("7", "The answer is $\\boxed{7}$. Then 8."),
    ("15", "Therefore, Annika has $15 left. The final answer is: \\boxed{\\15}"),
    ("5", "# Answer\n\n5"),
    ("1+2\\sqrt{3}", "So the answer is\n\n# Answer\n\n1+2\\sqrt{3}"),
    ("\\frac{1}{2}", "\\boxed{\\frac{1}{2}}"),
    ("2", "it is $\\boxed{3}$"),
]


def _disagreements(pairs, answers: bool = False):
    """Cases where the two verdicts differ; every gold, and the response too when ``answers`` (a pair of answer
    strings), prepared by ``latex_answer`` for both checkers (a whole response stays as written)."""
    pairs = [(pid, latex_answer(g), latex_answer(t) if answers else t) for pid, g, t in pairs]
    checker = AnswerChecker(mode="inline")
    try:
        ours = checker.check_many([(g, extract_answer(t)) for _, g, t in pairs])
    finally:
        checker.close()
    assert all(c.status is Status.OK for c in ours)
    theirs = [math_verify_default(g, t) for _, g, t in pairs]
    return {pid: (bool(c.equivalent), mv) for (pid, _, _), c, mv in zip(pairs, ours, theirs, strict=True)
            if bool(c.equivalent) != mv}


def _fixture() -> dict[str, dict]:
    return {r["id"]: r for r in json.loads(FIXTURE.read_text())}


def test_documented_behaviour_never_worse_than_math_verify():
    pairs = [(f"doc-{i}", g, t) for i, (g, t) in enumerate(DOCUMENTED)]
    diff = _disagreements(pairs)
    fixture = _fixture()
    assert set(diff) == {k for k in fixture if k.startswith("doc-")}
    for pid, (ours, mv) in diff.items():
        assert (ours, mv) == (fixture[pid]["rewardkit"], fixture[pid]["math_verify"])
        assert ours and not mv, f"{pid}: rewardkit rejects what math-verify accepts"


def test_real_outputs_never_worse_than_math_verify():
    """1,317 real pairs: every difference from math-verify's default is listed with a reason, and in each
    rewardkit accepts what math-verify's whole-response parse misses (never the other way round)."""
    if not (DATA / "processbench").is_dir():
        pytest.skip("shared data not found")
    pairs = real_pairs()
    assert len(pairs) == 1317
    diff = _disagreements(pairs)
    fixture = {k: v for k, v in _fixture().items() if not k.startswith(("doc-", *LABELLED))}
    assert set(diff) == set(fixture)
    labels = {pid: label for pid, _, _, label in answer_pairs()}
    for pid, (ours, mv) in diff.items():
        row = fixture[pid]
        assert (ours, mv) == (row["rewardkit"], row["math_verify"]) and row["reason"]
        assert ours and not mv, f"{pid}: rewardkit rejects what math-verify accepts"
        assert labels[pid] in (None, ours), f"{pid}: rewardkit differs from math-verify and from the label"


def test_labelled_public_cases_never_worse_than_math_verify():
    """math-verify's own tests and NeMo-Skills' pairs, labelled: wherever math-verify's default agrees with the
    label, rewardkit does too, and every case where the two differ is listed with its reason (in each, rewardkit
    agrees with the label). Cases labelled under non-default equality settings are left out."""
    cases = [c for c in json.loads(CASES.read_text())["cases"] if not c["settings"]]
    assert len(cases) >= 300
    diff = _disagreements([(c["id"], c["gold"], c["response"]) for c in cases], answers=True)
    fixture = {k: v for k, v in _fixture().items() if k.startswith(LABELLED)}
    assert set(diff) == set(fixture)
    label = {c["id"]: c["label"] for c in cases}
    for pid, (ours, mv) in diff.items():
        assert (ours, mv) == (fixture[pid]["rewardkit"], fixture[pid]["math_verify"]) and fixture[pid]["reason"]
        assert ours == label[pid], f"{pid}: rewardkit differs from math-verify and is wrong"


def test_the_held_out_split_is_chosen_by_source_and_frozen():
    """Issue 34: held out by source file (``HELD_OUT``), and its cases are the ones answer_parity.py froze (their
    sha256): relabelling, adding or dropping a held-out case fails here."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from answer_parity import FROZEN_HELD_OUT
    from derive_equivalence_cases import HELD_OUT

    cases = json.loads(CASES.read_text())["cases"]
    assert all((c["split"] == "held-out") == (c["source"]["path"] in HELD_OUT) for c in cases)
    rows = sorted((c["id"], c["gold"], c["response"], c["label"])
                  for c in cases if c["split"] == "held-out" and not c["settings"])
    assert len(rows) == 102
    assert hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode()).hexdigest() == FROZEN_HELD_OUT


@pytest.mark.parametrize("gold", ["NaN", "nan", "Infinity", "-inf", "1e999", "true", "False", "null", "", "  "])
def test_garbage_reference_is_an_explicit_error(gold):
    """Used to give every response 0 with status ok."""
    assert reference_problem(gold)
    checker = AnswerChecker(mode="inline")
    checks = checker.check_many([(gold, "5"), (gold, None)])
    assert all(c.status is Status.ERROR and c.equivalent is None and "reference" in c.message for c in checks)


@pytest.mark.parametrize("gold", ["0", "-3", "1e5", "\\infty", "9" * 5000, "x+1", "\\text{True}"])
def test_real_references_are_usable(gold):
    assert reference_problem(gold) is None


def test_answers_beyond_the_int_digit_limit_get_verdicts():
    """More than 4,300 digits used to raise in int() and kill the job."""
    big = "9" * 5000
    checker = AnswerChecker(mode="inline")
    res = checker.check_many([(big, big), (big, "0" + big), (big, big[:-1] + "8"), (big, "5"), ("5", big),
                              ("-" + big, big), (big, "x")])
    assert [c.equivalent for c in res] == [True, True, False, False, False, False, False]
    assert all(c.status is Status.OK for c in res)
    assert extract_answer(f"so \\boxed{{{big}}}") == big
