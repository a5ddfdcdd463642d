"""rewardkit's answer verdict against math-verify's default ``parse`` + ``verify`` on the same (gold, response)
pairs: real outputs (shared rollouts, ProcessBench solutions with a known gold, PRM800K samples) and
math-verify's documented behaviour. rewardkit is never worse; each pair where the two differ is listed
with its reason in ``fixtures/answer_vs_math_verify.json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from math_verify import parse, verify
from rewardkit.evals.data import shared_dir

from rewardkit.answers import AnswerChecker, extract_answer, reference_problem
from rewardkit.types import Status

FIXTURE = Path(__file__).parent / "fixtures" / "answer_vs_math_verify.json"
try:
    DATA = shared_dir() / "data"
except FileNotFoundError:
    DATA = Path("/nonexistent")


def math_verify_default(gold: str, response: str) -> bool:
    """math-verify's documented use: the gold as LaTeX, the whole response parsed with the default configs."""
    g = parse(f"${gold}$", parsing_timeout=None)
    p = parse(response, parsing_timeout=None)
    return bool(g and p and verify(g, p, timeout_seconds=None))


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.open()]


def real_pairs() -> list[tuple[str, str, str]]:
    """(id, gold, response) from the shared data: 800 rollouts, the ProcessBench gsm8k/math solutions whose
    problem is in GSM8K / MATH-500 (the gold comes from there), and the PRM800K samples' chosen steps."""
    pairs = []
    for r in _jsonl(DATA / "math_rollouts_qwen25" / "math_cot_100.jsonl"):
        pairs += [(f"{r['id']}#{i}", r["answer"], t) for i, t in enumerate(r["responses"])]
    gold = {r["problem"].strip(): r["answer"] for r in _jsonl(DATA / "math500" / "test.jsonl")}
    gold |= {r["question"].strip(): r["answer"] for r in _jsonl(DATA / "gsm8k" / "test.jsonl")}
    for split in ("gsm8k", "math"):
        for r in _jsonl(DATA / "processbench" / f"{split}.jsonl"):
            if r["problem"].strip() in gold:
                pairs.append((r["id"], gold[r["problem"].strip()], "\n\n".join(r["steps"])))
    for r in _jsonl(DATA / "prm800k_sample" / "samples.jsonl"):
        if r["question"].get("ground_truth_answer") is None:
            continue
        steps = []
        for s in r["label"]["steps"]:
            c = s["chosen_completion"]
            t = s["completions"][c]["text"] if c is not None else (s.get("human_completion") or {}).get("text")
            steps += [t] if t else []
        pairs.append((r["id"], r["question"]["ground_truth_answer"], "\n\n".join(steps)))
    return pairs


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


def _disagreements(pairs):
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
    fixture = {k: v for k, v in _fixture().items() if not k.startswith("doc-")}
    assert set(diff) == set(fixture)
    for pid, (ours, mv) in diff.items():
        row = fixture[pid]
        assert (ours, mv) == (row["rewardkit"], row["math_verify"]) and row["reason"]
        assert ours and not mv, f"{pid}: rewardkit rejects what math-verify accepts"


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
