"""Benchmark loaders: the shared offline copies by name (MATH-500, AIME 2024/2025, AMC23, GSM8K, HumanEval),
any JSONL / Parquet file with a column mapping, a hub dataset where a hub is reachable, and LiveCodeBench's
``code_generation_lite`` rows (private tests decoded without ever running pickle code).

Every loader returns ``Problem`` rows: an id, the question text, the reference answer (math) or the tests
(code), and the benchmark's prompt for generation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rewardkit.evals.data import data_path

from rewardkit.code.livecodebench import UnsafePickleError, decode_lcb_tests, safe_unpickle  # noqa: F401  (re-exported)

Kind = Literal["math", "code"]

# The boxed-answer instruction of Qwen2.5-Math's CoT evaluation and DeepSeek-R1's recommended math prompt.
MATH_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
CODE_INSTRUCTION = ("Complete the following Python function. Return the whole function in one ```python code block.")


@dataclass(frozen=True)
class Problem:
    """One benchmark problem: ``answer`` for math, ``tests`` (and ``entry_point``) for code."""

    id: str
    question: str
    answer: str | None = None
    kind: Kind = "math"
    tests: Any = None
    entry_point: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def messages(self) -> list[dict[str, str]]:
        """The chat prompt for sampling responses (boxed-answer instruction for math)."""
        if self.kind == "math":
            return [{"role": "user", "content": f"{self.question}\n{MATH_INSTRUCTION}"}]
        return [{"role": "user", "content": f"{CODE_INSTRUCTION}\n\n```python\n{self.question}```"}]


@dataclass(frozen=True)
class BenchSpec:
    """Where a shared benchmark lives and which fields hold what (from each folder's README)."""

    folder: str
    question: str
    answer: str | None
    kind: Kind = "math"
    file: str = "test.jsonl"


BENCHMARKS: dict[str, BenchSpec] = {
    "math500": BenchSpec("math500", "problem", "answer"),
    "aime24": BenchSpec("aime24", "problem", "answer"),
    "aime25": BenchSpec("aime25", "problem", "answer"),
    "amc23": BenchSpec("amc23", "problem", "answer"),
    "gsm8k": BenchSpec("gsm8k", "question", "answer"),
    "humaneval": BenchSpec("humaneval", "prompt", None, kind="code"),
}


class BenchmarkError(ValueError):
    """An unknown benchmark, a missing file or a missing field, with the place named."""


def gsm8k_final_answer(text: str) -> str:
    """GSM8K's final answer: the text after ``####`` with thousands separators removed (Cobbe et al. 2021)."""
    if "####" not in text:
        raise BenchmarkError(f"GSM8K answer has no '####' marker: {text[-80:]!r}")
    return text.rsplit("####", 1)[1].strip().replace(",", "")


def load_benchmark(name: str | Path, *, limit: int | None = None, mapping: dict[str, str] | None = None,
                   split: str = "test") -> list[Problem]:
    """Problems of a shared benchmark (``math500``, ``aime24``, ...), a JSONL / Parquet file (``mapping``
    names its ``id`` / ``question`` / ``answer`` columns), or ``hub:ORG/NAME`` (needs a reachable hub)."""
    from rewardkit.runtime.jobs import positive_int

    limit = None if limit is None else positive_int("--limit", limit)  # -1 would drop the last problem
    s = str(name)
    if s in BENCHMARKS:
        spec = BENCHMARKS[s]
        path = data_path(spec.folder, spec.file)
        if not path.exists():
            raise BenchmarkError(f"benchmark {s!r}: {path} not found (set REWARDKIT_SHARED to the shared folder)")
        if spec.kind == "code":
            return _humaneval(path, limit)
        m = {"id": "id", "question": spec.question, "answer": spec.answer}
        probs = load_file(path, mapping=m, limit=limit)
        return probs
    if s.startswith("hub:"):
        return _hub(s[4:], split, mapping or {}, limit)
    p = Path(s)
    if p.suffix in (".jsonl", ".json", ".parquet") or p.exists():
        if not p.exists():
            raise BenchmarkError(f"benchmark file {p} not found")
        return load_file(p, mapping=mapping, limit=limit)
    raise BenchmarkError(f"unknown benchmark {s!r}; known: {', '.join(BENCHMARKS)}, a .jsonl/.parquet path, "
                         "or hub:ORG/NAME")


def _records(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    rows = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise BenchmarkError(f"{path}:{n}: malformed JSON ({e.msg})") from None
    return rows


def load_file(path: str | Path, *, mapping: dict[str, str] | None = None, limit: int | None = None,
              kind: Kind = "math") -> list[Problem]:
    """Problems from any JSONL / Parquet file; ``mapping`` maps ``id`` / ``question`` / ``answer`` to
    column names (defaults: ``id``, the first of problem/question/prompt, the first of answer/reference)."""
    path = Path(path)
    rows = _records(path)[:limit] if limit is not None else _records(path)
    m = dict(mapping or {})
    for key in m:
        if key not in ("id", "question", "answer"):
            raise BenchmarkError(f"column mapping: unknown key {key!r} (use id, question, answer)")
    out = []
    for n, r in enumerate(rows, 1):
        q_col = m.get("question") or next((c for c in ("problem", "question", "prompt") if c in r), None)
        a_col = m.get("answer") or next((c for c in ("answer", "reference") if c in r), None)
        if q_col is None or q_col not in r:
            raise BenchmarkError(f"{path}:{n}: missing field {q_col or 'problem/question/prompt'!r} (columns: {sorted(r)})")
        if a_col is None or a_col not in r:
            raise BenchmarkError(f"{path}:{n}: missing field {a_col or 'answer'!r} (columns: {sorted(r)})")
        ans = str(r[a_col])
        if "####" in ans:
            ans = gsm8k_final_answer(ans)
        pid = str(r.get(m.get("id", "id"), f"{path.stem}-{n - 1}"))
        out.append(Problem(pid, str(r[q_col]), ans, kind))
    return out


def _humaneval(path: Path, limit: int | None) -> list[Problem]:
    out = []
    for n, r in enumerate(_records(path)[:limit] if limit is not None else _records(path), 1):
        try:
            out.append(Problem(r["task_id"], r["prompt"], None, "code", tests=r["test"], entry_point=r["entry_point"],
                               metadata={"canonical_solution": r.get("canonical_solution")}))
        except KeyError as e:
            raise BenchmarkError(f"{path}:{n}: missing field {e}") from None
    return out


def _hub(name: str, split: str, mapping: dict[str, str], limit: int | None) -> list[Problem]:
    """A hub dataset (only where a hub is reachable: nothing here downloads by default)."""
    import datasets

    try:
        ds = datasets.load_dataset(name, split=split)
    except Exception as e:  # offline, unknown name, no such split: one clear error
        raise BenchmarkError(f"cannot load hub dataset {name!r} (split {split!r}): {type(e).__name__}: {e}. "
                             "No hub is reachable here; pass a local .jsonl/.parquet path instead") from None
    rows = ds.select(range(min(limit, len(ds)))) if limit is not None else ds
    tmp = [dict(r) for r in rows]
    return [Problem(str(r.get(mapping.get("id", "id"), i)), str(r[mapping.get("question", "problem")]),
                    str(r[mapping.get("answer", "answer")])) for i, r in enumerate(tmp)]


# ------------------------------------------------------------------------------------- LiveCodeBench


# The LiveCodeBench test-case decoding (plain-data-only unpickler) lives with the code verifier.


def load_livecodebench(path: str | Path, *, limit: int | None = None) -> list[Problem]:
    """``code_generation_lite`` rows (JSONL) as code problems with public + private tests decoded; the
    function name for functional tests comes from the row's ``metadata`` JSON (``func_name``)."""
    path = Path(path)
    out = []
    for n, r in enumerate(_records(path)[:limit] if limit is not None else _records(path), 1):
        try:
            public = decode_lcb_tests(r["public_test_cases"])
            private = decode_lcb_tests(r["private_test_cases"]) if r.get("private_test_cases") else []
            meta = json.loads(r.get("metadata") or "{}")
            q = r["question_content"]
            pid = r["question_id"]
        except KeyError as e:
            raise BenchmarkError(f"{path}:{n}: missing field {e}") from None
        except ValueError as e:  # undecodable tests, or a refused pickle (UnsafePickleError)
            raise type(e)(f"{path}:{n}: {e}") from None
        out.append(Problem(str(pid), q, None, "code", tests={"public": public, "private": private},
                           entry_point=meta.get("func_name"),
                           metadata={k: r.get(k) for k in ("question_title", "platform", "contest_date",
                                                           "difficulty", "starter_code")}))
    return out
