"""Grade generated programs against tests in the sandbox: HumanEval (``check(candidate)``) and
LiveCodeBench (stdin/stdout and call-based), with LiveCodeBench's result codes, and the ``code`` scorer.

``grade(problem, program) -> CodeResult`` runs one program; ``grade_many`` runs many at once on a thread
pool (each thread drives one sandboxed process). Per test: 1 passed, -2 wrong answer, -3 time limit,
-4 runtime error (crash, compile error, output flood, interference with the harness), -5 runner error
(the grader failed: never the program's fault, never a silent 0).
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any, Literal

import numpy as np

from rewardkit.code import harness as _harness_module
from rewardkit.code.livecodebench import decode_lcb_tests, functional_equal, stdout_equal
from rewardkit.code.sandbox import Isolation, Limits, SandboxResult, python_paths, run_sandboxed
from rewardkit.options import Options, option
from rewardkit.scoring import BaseScorer
from rewardkit.types import Cost, Group, GroupScore, Status

TestKind = Literal["humaneval", "stdin", "functional"]  # how a problem's tests run
_HARNESS = Path(_harness_module.__file__).read_bytes()

# LiveCodeBench's ``import_string``: every program it grades starts with these imports.
LCB_PRELUDE = (
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
    "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\nfrom random import *\n"
    "from statistics import *\nfrom itertools import *\nfrom functools import *\nfrom operator import *\n"
    "from io import *\nfrom sys import *\nfrom json import *\nfrom builtins import *\nfrom typing import *\n"
    "import string\nimport re\nimport datetime\nimport collections\nimport heapq\nimport bisect\nimport copy\n"
    "import math\nimport random\nimport statistics\nimport itertools\nimport functools\nimport operator\n"
    "import io\nimport sys\nimport json\nsys.setrecursionlimit(50000)\n"
)


class Code(IntEnum):
    """LiveCodeBench's per-test result codes (1 for a pass)."""

    PASSED = 1
    WRONG_ANSWER = -2
    TIME_LIMIT = -3
    RUNTIME_ERROR = -4
    RUNNER_ERROR = -5


@dataclass(frozen=True)
class TestCase:
    input: str
    output: str


@dataclass(frozen=True)
class Problem:
    """One problem: HumanEval (``prompt``, ``test``, ``entry_point``) or LiveCodeBench (``tests``)."""

    id: str
    kind: TestKind
    prompt: str = ""
    test: str = ""
    entry_point: str = ""
    tests: tuple[TestCase, ...] = ()
    func_name: str | None = None

    def __post_init__(self) -> None:
        if self.kind == "humaneval" and not (self.test and self.entry_point):
            raise ValueError(f"problem {self.id!r}: HumanEval problems need 'test' and 'entry_point'")
        if self.kind != "humaneval" and not self.tests:
            raise ValueError(f"problem {self.id!r}: no test cases")
        if self.kind == "functional" and not self.func_name:
            raise ValueError(f"problem {self.id!r}: functional tests need metadata.func_name")

    @property
    def n_tests(self) -> int:
        return 1 if self.kind == "humaneval" else len(self.tests)

    @classmethod
    def from_row(cls, row: Mapping[str, Any], *, tests: Literal["all", "public"] = "all") -> Problem:
        """A HumanEval row (``prompt``, ``test``, ``entry_point``) or a LiveCodeBench ``code_generation_lite``
        row (``public_test_cases``, ``private_test_cases``, ``metadata``) or an ``input_output`` row."""
        pid = str(row.get("task_id") or row.get("id") or row.get("question_id") or "problem")
        if "test" in row and "entry_point" in row:
            return cls(pid, "humaneval", prompt=str(row.get("prompt", "")), test=str(row["test"]),
                       entry_point=str(row["entry_point"]))
        meta = row.get("metadata") or {}
        if isinstance(meta, str):
            meta = json.loads(meta or "{}")
        if "input_output" in row:
            io_ = row["input_output"]
            io_ = json.loads(io_) if isinstance(io_, str) else io_
            cases = [TestCase(str(i), str(o)) for i, o in zip(io_["inputs"], io_["outputs"])]
            fn = io_.get("fn_name")
            return cls(pid, "functional" if fn else "stdin", tests=tuple(cases), func_name=fn)
        if "public_test_cases" not in row:
            raise ValueError(f"problem {pid!r}: neither HumanEval fields (test, entry_point) nor LiveCodeBench "
                             "test cases (public_test_cases / input_output)")
        raw = decode_lcb_tests(row["public_test_cases"])
        if tests == "all" and row.get("private_test_cases"):
            raw = raw + decode_lcb_tests(row["private_test_cases"])
        types = {t.get("testtype", "stdin") for t in raw}
        if len(types) != 1 or not types <= {"stdin", "functional"}:
            raise ValueError(f"problem {pid!r}: test types {sorted(types)}; expected all 'stdin' or all 'functional'")
        kind = types.pop()
        return cls(pid, kind, tests=tuple(TestCase(str(t["input"]), str(t["output"])) for t in raw),
                   func_name=meta.get("func_name") if kind == "functional" else None)


@dataclass
class CodeResult:
    """One program's grade: per-test codes (stopping at the first failure, as LiveCodeBench does, unless
    asked to run all), the first failure's code and reason, and what the sandbox saw."""

    results: list[int]
    n_tests: int
    reason: str | None = None
    seconds: float = 0.0
    isolation: str = "namespaces"
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return len(self.results) == self.n_tests and all(r == Code.PASSED for r in self.results)

    @property
    def passed_fraction(self) -> float:
        return sum(r == Code.PASSED for r in self.results) / self.n_tests if self.n_tests else 0.0

    @property
    def code(self) -> int:
        """1 if every test passed, else the first failure's code."""
        return next((r for r in self.results if r != Code.PASSED), Code.PASSED if self.passed else Code.RUNNER_ERROR)

    @property
    def runner_error(self) -> bool:
        return Code.RUNNER_ERROR in self.results


# numeric libraries start a thread (and a buffer) per core otherwise: programs are graded one core each
SINGLE_THREADED = {v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")}


@dataclass(frozen=True)
class GradeConfig:
    """How programs are run: the per-test time limit, memory, and the sandbox's isolation."""

    timeout: float = 6.0  # seconds per test (LiveCodeBench's default); the whole check() for HumanEval
    memory_bytes: int = 512 << 20  # address space per process (RLIMIT_AS)
    program_memory_bytes: int = 1 << 30  # all processes of one program together (memory cgroup, where possible)
    processes: int = 16  # processes + threads; without a cgroup a program may use processes x memory_bytes
    disk_bytes: int = 64 << 20  # all files the program writes, together (tmpfs, with namespaces)
    stop_at_first_failure: bool = True
    isolation: Isolation = "auto"
    max_output_bytes: int = 1 << 20  # per stdin test
    site_packages: bool = True  # let programs import installed packages (numpy, ...)


_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.S | re.I)


def extract_code(response: str) -> str:
    """The program in a response: the last fenced code block if there is one, else the text as is."""
    blocks = _FENCE.findall(response)
    return blocks[-1] if blocks else response


def build_program(problem: Problem, response: str) -> str:
    """HumanEval: a full program (defines the entry point) gets what precedes the prompt's stub before it;
    a completion is appended to the prompt. LiveCodeBench: the extracted code."""
    code = extract_code(response)
    if problem.kind != "humaneval":
        return code
    if _stub(problem.entry_point).search(code):
        return _helpers(problem) + code  # the prompt's imports and helpers, not its stub
    return problem.prompt + code


def _stub(entry_point: str) -> re.Pattern:
    return re.compile(rf"^def\s+{re.escape(entry_point)}\s*\(", re.M)


def _helpers(problem: Problem) -> str:
    """What a HumanEval prompt defines before the entry point's stub: imports and helpers (e.g. poly)."""
    m = _stub(problem.entry_point).search(problem.prompt)
    return problem.prompt[:m.start()] if m else ""


def grade(problem: Problem, response: str, config: GradeConfig = GradeConfig()) -> CodeResult:
    """Run one response against one problem's tests in a fresh sandbox."""
    source = build_program(problem, response)
    nonce = secrets.token_hex(16)
    prog = {"kind": problem.kind, "source": source, "function": problem.func_name or problem.entry_point,
            "prelude": "" if problem.kind == "humaneval" else LCB_PRELUDE}
    tests: dict[str, Any] = {"timeout": config.timeout, "stop": config.stop_at_first_failure,
                             "max_output": config.max_output_bytes}
    if problem.kind == "humaneval":
        tests.update(prompt=_helpers(problem), test=problem.test)
    else:
        tests["inputs"] = [t.input for t in problem.tests]
    stdin = _frame(prog) + _frame(tests) + nonce.encode() + b"\n"
    budget = config.timeout * problem.n_tests
    # what a run may write (stdout and stderr together): 4 MiB of its own (debugging output, a record of values),
    # and a stdin run's record on top: every test's output (each up to max_output_bytes, in base64: 4 bytes per 3,
    # plus its JSON framing), so the cap grows with the tests, as the budget does
    record = (4 * -(-config.max_output_bytes // 3) + 64) * problem.n_tests if problem.kind == "stdin" else 0
    limits = Limits(cpu_seconds=budget + 5, wall_seconds=budget + 10, memory_bytes=config.memory_bytes,
                    output_bytes=(4 << 20) + record,
                    processes=config.processes, program_memory_bytes=config.program_memory_bytes,
                    disk_bytes=config.disk_bytes)
    # -s (no user site), not -I: its -E drops PYTHONHASHSEED, and str hashes (set order, hence printed output)
    # would vary from run to run; the environment is the sandbox's clean one, and the harness takes its own
    # folder (the program's working directory) off sys.path, as -I would
    argv = [sys.executable, "-s", "-B"] + ([] if config.site_packages else ["-S"]) + ["harness.py"]
    res = run_sandboxed(argv, stdin=stdin, files={"harness.py": _HARNESS}, limits=limits,
                        env={"PYTHONHASHSEED": "0", "PYTHONIOENCODING": "utf-8", **SINGLE_THREADED},
                        readonly_paths=python_paths(),
                        isolation=config.isolation)
    return _verdict(problem, res, nonce, config)


def grade_many(items: Sequence[tuple[Problem, str]], *, workers: int = 2,
               config: GradeConfig = GradeConfig()) -> list[CodeResult]:
    """Grade many (problem, response) pairs at once; results in input order."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if workers == 1 or len(items) <= 1:
        return [grade(p, r, config) for p, r in items]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rk-code") as pool:
        return list(pool.map(lambda pr: grade(pr[0], pr[1], config), items))


def _frame(obj: dict) -> bytes:
    data = json.dumps(obj).encode()
    return str(len(data)).encode() + b"\n" + data


def _verdict(problem: Problem, res: SandboxResult, nonce: str, config: GradeConfig) -> CodeResult:
    """Trust only a record carrying this run's nonce, from a harness that exited 0; compare outputs here."""
    base: dict[str, Any] = {"seconds": res.seconds, "isolation": res.isolation_used}
    n = problem.n_tests
    base["details"] = {"uid": res.uid}
    if res.error:
        return CodeResult([Code.RUNNER_ERROR], n, f"sandbox failure: {res.error}", **base)
    record = _find_record(res.stdout, nonce)
    memory = _memory_overrun(res, config)
    if record is None or res.returncode != 0:
        if memory:
            return CodeResult([Code.RUNTIME_ERROR], n, memory, **base)
        if res.timed_out or res.cpu_exceeded:
            return CodeResult([Code.TIME_LIMIT], n, "time limit exceeded (the whole run)", **base)
        if res.output_truncated:
            return CodeResult([Code.RUNTIME_ERROR], n, "output limit exceeded", **base)
        tail = res.stderr.decode("utf-8", "replace")[-500:]
        why = ("the test harness ended without its result record" if record is None
               else f"the test harness exited with status {res.returncode} / signal {res.signal}")
        return CodeResult([Code.RUNTIME_ERROR], n, f"{why}: the program interfered with the harness. {tail}", **base)
    codes: list[int] = []
    reason = None
    details: dict[str, Any] = {}
    for i, r in enumerate(record.get("results", [])):
        code, why = _judge(problem, i, r)
        codes.append(code)
        if code != Code.PASSED and reason is None:
            reason, details = why, {"test": i}
            if config.stop_at_first_failure:
                break
    if not codes or (len(codes) < n and all(c == Code.PASSED for c in codes)):
        return CodeResult([Code.RUNNER_ERROR], n, f"the harness reported {len(codes)} results for {n} tests", **base)
    if memory:  # a program that broke the memory cap never passes, whatever its surviving process returned
        # (before: OOM-killed children and a parent that returned the answer graded passed=True; a test held at
        # the cap crawled to its time limit; memory in memfds read as "the program exited during a call")
        codes = [c if c == Code.WRONG_ANSWER else Code.RUNTIME_ERROR for c in codes]
        reason, details = memory, {}
    base["details"].update(details)
    return CodeResult(codes, n, reason, **base)


def _memory_overrun(res: SandboxResult, config: GradeConfig) -> str | None:
    """What happened to the program's memory, when it went over the cap of all its processes together: the
    kernel killed one of them, or the tree reached the cap and was held there (reclaim) until a deadline."""
    if not (res.memory_exceeded or res.memory_at_cap):
        return None
    how = ("the kernel's OOM killer ended a process" if res.memory_exceeded
           else "the program reached the cap and was held there")
    return f"memory limit exceeded (all processes together, {config.program_memory_bytes >> 20} MiB): {how}"


def _find_record(stdout: bytes, nonce: str) -> dict | None:
    for line in reversed(stdout.decode("utf-8", "replace").splitlines()):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and secrets.compare_digest(str(rec.get("nonce", "")), nonce):
            return rec
    return None


def _judge(problem: Problem, i: int, r: dict) -> tuple[int, str | None]:
    if "code" in r:
        return int(r["code"]), r.get("reason")
    if i >= len(problem.tests):
        return Code.RUNNER_ERROR, f"result for test {i} of {len(problem.tests)}"
    expected = problem.tests[i].output
    if problem.kind == "stdin":
        try:  # the harness sends a code or the program's output: neither is its own failure
            got = base64.b64decode(r["stdout_b64"], validate=True).decode("utf-8", "replace")
        except (KeyError, TypeError, ValueError):
            return Code.RUNNER_ERROR, f"no readable output from the harness for test {i}"
        ok, why = stdout_equal(got, expected)
        return (Code.PASSED, None) if ok else (Code.WRONG_ANSWER, why)
    try:
        value = _harness_module.decode(r["value"])
    except (KeyError, TypeError, ValueError) as e:
        return Code.RUNNER_ERROR, f"undecodable value from the harness: {e}"
    try:
        gold = json.loads(expected)
    except ValueError as e:
        return Code.RUNNER_ERROR, f"expected output of test {i} is not JSON: {e}"
    if functional_equal(value, gold):
        return Code.PASSED, None
    return Code.WRONG_ANSWER, f"wrong answer on test {i}: got {str(value)[:200]}, expected {str(gold)[:200]}"


# ----------------------------------------------------------------------------------------- scorer


@dataclass(frozen=True)
class CodeOptions(Options):
    """Options of the ``code`` scorer."""

    timeout: float = option(6.0, "seconds per test case (the whole check() for HumanEval)")
    workers: int = option(2, "programs graded at once, each in its own sandbox")
    reward: Literal["all", "fraction"] = option("all", "1 when every test passes, or the fraction of test cases passed")
    tests: Literal["all", "public"] = option("all", "LiveCodeBench: public and private test cases, or public ones only")
    memory_mb: int = option(512, "address-space limit per process, in MiB")
    program_memory_mb: int = option(1024, "memory of all processes of one program together, in MiB (a memory cgroup, "
                                          "where one can be made; else processes x memory_mb bounds it)")
    isolation: Literal["auto", "namespaces", "none"] = option(
        "auto", "namespaces where permitted (auto warns when not), required, or never")

    def __post_init__(self) -> None:
        super().__post_init__()
        self._at_least(0, "timeout", strict=True)
        self._at_least(1, "workers")
        self._at_least(64, "memory_mb")
        self._at_least(64, "program_memory_mb")

    def grade_config(self) -> GradeConfig:
        return GradeConfig(timeout=self.timeout, memory_bytes=self.memory_mb << 20,
                           program_memory_bytes=self.program_memory_mb << 20,
                           stop_at_first_failure=self.reward == "all", isolation=self.isolation)


class CodeScorer(BaseScorer):
    """Execution reward: run each response against its problem's tests in the sandbox.

    Rows are HumanEval rows (``prompt``, ``test``, ``entry_point``) or LiveCodeBench rows (test cases in
    ``public_test_cases`` / ``private_test_cases``, ``metadata.func_name``). A failing program gets reward
    0 with status ok; a runner failure (-5) or a row without tests gets status error and no reward.
    """

    name = "code"
    Options = CodeOptions
    options: CodeOptions

    def _score(self, groups: list[Group]) -> list[GroupScore]:
        opts = self.options
        problems: list[Problem | str] = []
        for g in groups:
            try:
                problems.append(Problem.from_row({**g.metadata, "prompt": g.prompt, "id": g.id}, tests=opts.tests))
            except (ValueError, KeyError, TypeError) as e:
                problems.append(f"group {g.id!r}: {e}")
        items = [(p, r) for p, g in zip(problems, groups) if isinstance(p, Problem) for r in g.responses]
        graded = iter(grade_many(items, workers=opts.workers, config=opts.grade_config()))
        out = []
        for p, g in zip(problems, groups):
            if isinstance(p, str):
                out.append(GroupScore.failed(g.id, len(g), Status.ERROR, p))
                continue
            res = [next(graded) for _ in g.responses]
            value = [r.passed_fraction if opts.reward == "fraction" else float(r.passed) for r in res]
            statuses = [Status.ERROR if r.runner_error else Status.OK for r in res]
            out.append(GroupScore(
                g.id, np.array([np.nan if s is Status.ERROR else v for v, s in zip(value, statuses)]), statuses,
                components={"passed_fraction": np.array([r.passed_fraction for r in res]),
                            "code": np.array([int(r.code) for r in res])},
                cost=Cost(verifier_calls=len(res)),
                messages=[r.reason if s is Status.ERROR else None for r, s in zip(res, statuses)],
                extra={"results": [[int(c) for c in r.results] for r in res], "reasons": [r.reason for r in res]},
            ))
        return out

