"""The code verifier on real data (all 164 HumanEval problems), LiveCodeBench-format fixtures, output
comparison as LiveCodeBench does it, and a hostile suite that must be contained and graded as failures."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest
from rewardkit.evals.data import data_path

from rewardkit.code import harness as harness_module
from rewardkit.code.execution import (
    Code,
    GradeConfig,
    Problem,
    _verdict,
    build_program,
    extract_code,
    grade,
    grade_many,
)
from rewardkit.code.execution import (
    TestCase as Case,  # named apart: pytest would try to collect a Test* class
)
from rewardkit.code.livecodebench import decode_lcb_tests, functional_equal, stdout_equal
from rewardkit.code.sandbox import SandboxResult, namespaces_available, run_sandboxed

HUMANEVAL = [json.loads(line) for line in open(data_path("humaneval") / "test.jsonl")]
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "livecodebench_lite.jsonl"
LCB = [json.loads(line) for line in open(FIXTURE)]
needs_ns = pytest.mark.skipif(not namespaces_available(), reason="namespaces not permitted on this machine")


def procs_left(uid: int | None, within: float = 5.0) -> list[int]:
    """The run's processes still alive once SIGKILLed ones had ``within`` seconds to leave the process table."""
    deadline = time.monotonic() + within
    while (left := sandbox_procs(uid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def sandbox_procs(uid: int | None) -> list[int]:
    """Live processes still running as a finished run's own uid (zombies count as gone)."""
    if uid is None:
        return []
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                st = os.stat(f"/proc/{name}")
                state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if st.st_uid == uid and state != "Z":
                out.append(int(name))
    return out


# -------------------------------------------------------------------------------------- HumanEval


def test_all_canonical_humaneval_solutions_pass_and_wrong_ones_fail():
    problems = [Problem.from_row(r) for r in HUMANEVAL]
    assert len(problems) == 164
    good = grade_many([(p, r["canonical_solution"]) for p, r in zip(problems, HUMANEVAL)], workers=2)
    failed = {p.id: (g.results, g.reason) for p, g in zip(problems, good) if not g.passed}
    assert failed == {}
    # an obviously wrong body for every problem: it returns nothing; each must be a wrong answer (-2)
    bad = grade_many([(p, "    return None\n") for p in problems], workers=2)
    codes = {p.id: b.results for p, b in zip(problems, bad)}
    assert {k: v for k, v in codes.items() if v != [Code.WRONG_ANSWER]} == {}


def test_full_program_and_fenced_block_are_accepted():
    row = HUMANEVAL[2]  # truncate_number(number: float) -> float
    p = Problem.from_row(row)
    full = "Here you go:\n```python\ndef truncate_number(number: float) -> float:\n    return number % 1.0\n```\n"
    assert grade(p, full).passed
    assert grade(p, "```python\n    return number % 1.0\n```").passed  # a fenced completion
    assert build_program(p, full).startswith("\n\ndef truncate_number")  # the prompt's stub is not repeated
    assert extract_code("```py\na\n```\ntext\n```python\nb\n```") == "b\n"
    assert extract_code("    return 1\n") == "    return 1\n"  # no fence: kept as is, indentation included


def test_helpers_of_the_prompt_are_available_to_the_test():
    row = next(r for r in HUMANEVAL if r["entry_point"] == "find_zero")  # the test calls poly() from the prompt
    p = Problem.from_row(row)
    assert grade(p, row["canonical_solution"]).passed
    assert grade(p, "    return 0.123\n").results == [Code.WRONG_ANSWER]


def test_runtime_error_and_compile_error_are_runtime_errors():
    p = Problem.from_row(HUMANEVAL[0])
    r = grade(p, "    raise ValueError('boom')\n")
    assert r.results == [Code.RUNTIME_ERROR] and "ValueError: boom" in r.reason
    r = grade(p, "    return (\n")
    assert r.results == [Code.RUNTIME_ERROR] and "SyntaxError" in r.reason


# --------------------------------------------------------------------------------- LiveCodeBench


def test_livecodebench_fixture_stdin_and_functional():
    stdin_p, func_p = (Problem.from_row(r) for r in LCB)
    assert stdin_p.kind == "stdin" and func_p.kind == "functional" and func_p.func_name == "doubleIt"
    assert stdin_p.n_tests == 1 + len(decode_lcb_tests(LCB[0]["private_test_cases"])) > 1
    ok = grade(stdin_p, "```python\na, b = map(int, input().split())\nprint(a + b)\n```")
    assert ok.passed and ok.results == [Code.PASSED] * stdin_p.n_tests
    assert grade(stdin_p, "a, b = map(int, input().split())\nprint(a - b)").code == Code.WRONG_ANSWER
    assert grade(stdin_p, "import sys\nprint(sum(map(int, sys.stdin.read().split())))\nsys.exit(0)").passed
    sol = "class Solution:\n    def doubleIt(self, x: int) -> int:\n        return 2 * x\n"
    assert grade(func_p, sol).passed
    wrong = grade(func_p, sol.replace("2 * x", "x + 2"))
    assert wrong.code == Code.WRONG_ANSWER and Problem.from_row(LCB[1], tests="public").n_tests == 1
    # LiveCodeBench's prelude: names from collections etc. are there without imports
    assert grade(func_p, "class Solution:\n    def doubleIt(self, x):\n        return sum(Counter({1: 2 * x}).values())\n").passed


def test_stop_at_first_failure_as_livecodebench_or_run_all():
    p = Problem("t", "stdin", tests=tuple(Case(i, o) for i, o in [("1", "1"), ("2", "3"), ("3", "3"), ("4", "5")]))
    prog = "print(input())"
    first = grade(p, prog)
    assert first.results == [Code.PASSED, Code.WRONG_ANSWER] and first.passed_fraction == pytest.approx(1 / 4)
    everything = grade(p, prog, GradeConfig(stop_at_first_failure=False))
    assert everything.results == [Code.PASSED, Code.WRONG_ANSWER, Code.PASSED, Code.WRONG_ANSWER]
    assert everything.passed_fraction == pytest.approx(2 / 4) and not everything.passed
    # the reason is the first failure's, and says which test it was
    for r in (first, everything):
        assert r.details["test"] == 1 and "'2' != '3'" in r.reason and r.code == Code.WRONG_ANSWER, r


def test_time_limit_per_test_on_stdin_and_functional():
    p = Problem("t", "stdin", tests=(Case("1", "1"), Case("2", "2")))
    r = grade(p, "import time\nx = input()\nif x == '2':\n    time.sleep(60)\nprint(x)", GradeConfig(timeout=1))
    assert r.results == [Code.PASSED, Code.TIME_LIMIT]
    f = Problem("f", "functional", tests=(Case("1", "1"),), func_name="f")
    assert grade(f, "def f(x):\n    while True: pass", GradeConfig(timeout=1)).results == [Code.TIME_LIMIT]


@pytest.mark.slow
def test_the_whole_runs_budget_grows_with_the_number_of_tests():
    # LiveCodeBench's timeout is per test: 64 tests of 0.33 s each at timeout 3 s pass, though together they take
    # 21 s, longer than one test's timeout plus the sandbox's 10 s margin (what a run budget of timeout alone
    # allows) and than the sandbox's own default (20 s). Each test keeps 2.6 s of its limit in hand for a loaded machine.
    p = Problem("t", "stdin", tests=tuple(Case(str(i), str(i)) for i in range(64)))
    r = grade(p, "import time\nx = input()\ntime.sleep(0.33)\nprint(x)", GradeConfig(timeout=3))
    assert r.results == [Code.PASSED] * 64, r.reason


def test_output_comparison_follows_livecodebench():
    assert stdout_equal("3\n", "3")[0] and stdout_equal("  1 2  \n3\n\n", "1 2\n3")[0]
    assert stdout_equal("0.50\n", "0.5")[0]  # numeric lines compare as Decimals
    assert not stdout_equal("0.5000001", "0.5")[0]  # exact, no tolerance
    assert not stdout_equal("1\n2", "1")[0] and not stdout_equal("abc", "abd")[0]
    assert functional_equal((1, 2), [1, 2]) and not functional_equal([(1, 2)], [[1, 2]])  # top level only
    assert functional_equal(6.0, 6) and not functional_equal("6", 6)


def test_malformed_problems_are_refused():
    with pytest.raises(ValueError, match="neither HumanEval fields"):
        Problem.from_row({"prompt": "x"})
    with pytest.raises(ValueError, match="func_name"):
        Problem.from_row({**LCB[1], "metadata": "{}"})
    with pytest.raises(ValueError, match="neither JSON nor"):
        decode_lcb_tests("not json, not base64")


def test_runner_failure_is_code_minus_5_never_a_pass():
    p = Problem("x", "humaneval", prompt="def f():\n", test="this is not python", entry_point="f")
    r = grade(p, "    return 1\n")
    assert r.results == [Code.RUNNER_ERROR] and r.runner_error and not r.passed


# ------------------------------------------------------------------------------------ hostile suite

ADD = Problem("add", "humaneval", prompt="def add(a, b):\n",
              test="def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n",
              entry_point="add")


@pytest.fixture(scope="module")
def planted():
    """A secret in the parent's environment, a file in the user's home, a world-writable directory outside
    the sandbox and a real listening socket on 127.0.0.1."""
    home = Path(os.environ.get("HOME", "/root"))
    secret_file = home / f".rk-planted-{uuid.uuid4().hex}"
    secret_file.write_text("planted secret")
    open_dir = Path(tempfile.mkdtemp(prefix="rk-open-"))
    open_dir.chmod(0o777)
    os.environ["RK_PLANTED_SECRET"] = "hunter2"
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    try:
        yield {"file": str(secret_file), "dir": str(open_dir), "port": srv.getsockname()[1], "server": srv}
    finally:
        srv.close()
        del os.environ["RK_PLANTED_SECRET"]
        secret_file.unlink()
        shutil.rmtree(open_dir)


# name -> (program, expected code). Each program answers correctly only if its attack worked.
HOSTILE = {
    "fork bomb": ("""
        import os
        def add(a, b):
            while True:
                try:
                    os.fork()
                except OSError:
                    pass
    """, Code.TIME_LIMIT),
    "memory bomb": ("""
        def add(a, b):
            x = b'x' * (8 << 30)  # far past the address-space limit: refused at once, not after paging
            return a + b
    """, Code.RUNTIME_ERROR),
    "many processes of memory": ("""
        import os, time
        def add(a, b):
            for _ in range(8):  # 8 x 200 MiB, each process under its own limit: the whole tree is over 1 GiB
                if os.fork() == 0:
                    hog = b'x' * (200 << 20)
                    time.sleep(0.5)
                    os._exit(0)
            if not all(os.wait()[1] == 0 for _ in range(8)):
                raise MemoryError("a process was killed")
            return a + b
    """, Code.RUNTIME_ERROR),
    "children killed for memory, the parent returns": ("""
        import os, time
        def add(a, b):
            for _ in range(4):  # 4 x 400 MiB, each under its own limit: together over the 1 GiB cap
                if os.fork() == 0:
                    hog = b'x' * (400 << 20)
                    time.sleep(2)
                    os._exit(0)
            for _ in range(4):
                os.wait()  # whatever became of them: the OOM killer ended some
            return a + b
    """, Code.RUNTIME_ERROR),
    "memory in memfds": ("""
        import os
        def add(a, b):
            fds = []
            for _ in range(120):  # 120 x 12 MiB (each file under the file-size limit): 1.4 GiB, no address space
                fd = os.memfd_create("hog")
                for _ in range(12):
                    os.write(fd, b"x" * (1 << 20))
                fds.append(fd)
            return a + b
    """, Code.RUNTIME_ERROR),
    "memory balloon whose processes wait": ("""
        import os, time
        def add(a, b):
            for _ in range(4):  # 4 x 300 MiB, each under its own limit: together over the 1 GiB cap
                if os.fork() == 0:
                    hog = b'x' * (300 << 20)
                    time.sleep(60)  # the survivors of the OOM kill hold the parent past the test's time limit
                    os._exit(0)
            for _ in range(4):
                os.wait()
            return a + b
    """, Code.RUNTIME_ERROR),
    "recursion bomb": ("def add(a, b):\n    return add(a, b) + 1\n", Code.RUNTIME_ERROR),
    "C-stack recursion bomb": ("""
        import sys
        sys.setrecursionlimit(10 ** 7)
        def add(a, b):
            return eval('add(a, b)')  # every level through C: the C stack overflows, the process dies
    """, Code.RUNTIME_ERROR),
    "infinite loop": ("def add(a, b):\n    while True:\n        pass\n", Code.TIME_LIMIT),
    "infinite loop while loading": ("while True:\n    pass\ndef add(a, b):\n    return a + b\n", Code.TIME_LIMIT),
    "sleep past the deadline": ("import time\ndef add(a, b):\n    time.sleep(3600)\n", Code.TIME_LIMIT),
    "output flood": ("def add(a, b):\n    while True:\n        print('x' * 65536)\n", Code.RUNTIME_ERROR),
    "read the environment": ("""
        import os
        def add(a, b):
            return a + b if os.environ.get('RK_PLANTED_SECRET') == 'hunter2' else None
    """, Code.WRONG_ANSWER),
    "read a file in the home": ("""
        def add(a, b):
            try:
                return a + b if open({file!r}).read() == 'planted secret' else None
            except OSError:
                return None
    """, Code.WRONG_ANSWER),
    "read the checkout and other top-level folders": ("""
        import os
        def add(a, b):
            seen = []
            for path in ({checkout!r}, "/opt", "/srv", "/var/log"):
                try:
                    seen.append(open(path).read(1) if os.path.isfile(path) else os.listdir(path))
                except OSError:
                    pass
            return a + b if any(seen) else None  # before: this checkout's README and /opt were readable
    """, Code.WRONG_ANSWER),
    "write outside the directory": ("""
        def add(a, b):
            try:
                open({dir!r} + '/escaped', 'w').write('x')
                open('/escaped-to-root', 'w').write('x')
                return a + b
            except OSError:
                return None
    """, Code.WRONG_ANSWER),
    "network connection": ("""
        import socket
        def add(a, b):
            try:
                socket.create_connection(('127.0.0.1', {port}), timeout=1).close()
                return a + b
            except OSError:
                return None
    """, Code.WRONG_ANSWER),
    "kill the parent": ("""
        import os, signal
        for pid in (os.getppid(), 1, {host_pid}, -1):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        def add(a, b):
            return a + b
    """, Code.RUNTIME_ERROR),
    "daemon outliving the run": ("""
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(3600)
            os._exit(0)
        def add(a, b):
            return None
    """, Code.WRONG_ANSWER),
    "close every descriptor": ("""
        import os
        def add(a, b):
            os.closerange(0, 1024)
            return a + b
    """, Code.RUNTIME_ERROR),
    "forge a record on every descriptor": ("""
        import json, os
        fake = (json.dumps({{'nonce': '0' * 32, 'results': [{{'code': 1}}]}}) + '\\n').encode()
        for fd in range(0, 64):
            try:
                os.write(fd, fake)
            except OSError:
                pass
        for path in ('/proc/%d/fd/1' % os.getppid(), '/proc/1/fd/1'):
            try:
                open(path, 'wb').write(fake)
            except OSError:
                pass
        def add(a, b):
            return None
    """, Code.RUNTIME_ERROR),  # it wrote garbage into its own reply pipe too
    "chdir then escape": ("""
        import os
        def add(a, b):
            try:
                for _ in range(20):
                    os.chdir('..')
                open('escaped-by-chdir', 'w').write('x')
                return a + b
            except OSError:
                return None
    """, Code.WRONG_ANSWER),
    "os._exit(0) before the tests": ("import os\nprint('ALL TESTS PASSED')\nos._exit(0)\n", Code.RUNTIME_ERROR),
    "fake success marker": ("""
        import json, sys
        print(json.dumps({{'nonce': 'x', 'results': [{{'code': 1}}]}}))
        print('ALL TESTS PASSED')
        def add(a, b):
            return None
    """, Code.WRONG_ANSWER),
    "monkey-patch the checker": ("""
        import builtins
        def check(candidate):
            pass
        builtins.AssertionError = type('Nope', (Exception,), {{}})
        class Always:
            def __eq__(self, other):
                return True
        def add(a, b):
            return Always()
    """, Code.RUNTIME_ERROR),
    "exit before the asserts": ("import sys\ndef add(a, b):\n    sys.exit(0)\n", Code.RUNTIME_ERROR),
    "stop the harness": ("""
        import os, signal
        os.kill(os.getppid(), signal.SIGSTOP)  # the harness, stopped, uses no CPU: the run's wall budget ends it
        def add(a, b):
            return a + b
    """, Code.TIME_LIMIT),
    "steal the nonce from the harness": ("""
        import os
        def add(a, b):
            for what in ('fd/0', 'mem', 'environ'):
                try:
                    open('/proc/%d/%s' % (os.getppid(), what), 'rb').read(64)
                    return a + b
                except OSError:
                    pass
            return None
    """, Code.WRONG_ANSWER),
}


@needs_ns
@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_program_is_contained_and_fails(name, planted):
    program, expected = HOSTILE[name]
    cgroup = name in ("many processes of memory", "memory balloon whose processes wait",
                      "children killed for memory, the parent returns", "memory in memfds")
    if cgroup and not run_sandboxed(["/bin/true"]).memory_bound.startswith("cgroup"):
        pytest.skip("no memory cgroup here: memory is bounded per process (x the process cap), as the README states")
    program = textwrap.dedent(program).format(file=planted["file"], dir=planted["dir"], port=planted["port"],
                                              host_pid=os.getpid(),
                                              checkout=str(Path(__file__).resolve().parents[2] / "README.md"))
    r = grade(ADD, program, GradeConfig(timeout=10 if cgroup else 2))  # OOM is slow
    assert r.results == [expected], (r.results, r.reason)
    # before: -3 "time limit exceeded (test code)"; passed with memory_exceeded; -4 "exited during a call"
    if name == "stop the harness":
        assert r.reason == "time limit exceeded (the whole run)", r.reason
    if name in ("memory balloon whose processes wait", "children killed for memory, the parent returns",
                "memory in memfds"):
        assert r.reason.startswith("memory limit exceeded (all processes together, 1024 MiB)"), r.reason
    assert not r.passed
    assert r.n_tests == 1 and (r.details["uid"] is not None) == (os.geteuid() == 0)  # root: a uid of its own
    assert procs_left(r.details["uid"]) == []  # nothing of the run is left, daemons included
    assert Path(planted["file"]).read_text() == "planted secret"
    assert list(Path(planted["dir"]).iterdir()) == [] and not Path("/escaped-to-root").exists()
    with pytest.raises(socket.timeout):
        planted["server"].accept()
    assert grade(ADD, "def add(a, b):\n    return a + b\n").passed  # the host still grades normally


# ------------------------------------------------------------------ what grade sets up around a program

ECHO = Problem("echo", "stdin", tests=(Case("7", "7"),))


def test_humaneval_programs_get_no_livecodebench_prelude():
    # HumanEval runs prompt + completion as they are: math's names exist only when imported (LiveCodeBench programs
    # get its import_string: test_livecodebench_fixture_stdin_and_functional)
    r = grade(ADD, "def add(a, b):\n    return int(fsum([a, b]))\n")
    assert r.results == [Code.RUNTIME_ERROR] and "NameError: name 'fsum' is not defined" in r.reason, r.reason
    assert grade(ADD, "from math import fsum\ndef add(a, b):\n    return int(fsum([a, b]))\n").passed


def test_what_a_run_may_write_is_capped_at_4_mib_and_every_stdin_tests_output():
    # stdout + stderr of the whole run: 4 MiB of its own (a HumanEval record included); a stdin run also carries
    # every test's output back in its record (up to max_output_bytes each, in base64: 4/3 of it, 1.33 MiB here)
    for problem, answer, cap in ((ADD, "def add(a, b):\n    return a + b\n", 4),
                                 (ECHO, "print(input())\n", 4 + 4 / 3)):
        for mib in (cap - 0.5, cap + 0.2):  # debugging output on stderr, then the right answer
            r = grade(problem, f"import sys\nsys.stderr.write('x' * {int(mib * (1 << 20))})\n" + answer)
            if mib < cap:
                assert r.passed, (problem.kind, r.reason)
            else:
                assert r.results == [Code.RUNTIME_ERROR] and r.reason == "output limit exceeded", (problem.kind, r)
                assert r.n_tests == 1 and "uid" in r.details
    # max_output_bytes is a stdin test's: a HumanEval (or call-based) run keeps 4 MiB whatever it says
    r = grade(ADD, f"import sys\nsys.stderr.write('x' * {int(4.5 * (1 << 20))})\n" + "def add(a, b):\n    return a + b\n",
              GradeConfig(max_output_bytes=6 << 20))
    assert r.results == [Code.RUNTIME_ERROR] and r.reason == "output limit exceeded", r
    # a stdin test's whole output comes back in the record: with 6 MiB per test, 5 MB passes
    big = Problem("x", "stdin", tests=(Case("5000000", "x" * 5_000_000),))
    r = grade(big, "print('x' * int(input()))", GradeConfig(max_output_bytes=6 << 20))
    assert r.passed, r.reason
    # and every test's: five outputs of 900 kB, each under the 1 MiB per-test limit, are 4.5 MB together (a correct
    # program failed as "output limit exceeded" while the cap was 4 MiB whatever the number of tests)
    many = Problem("x", "stdin", tests=tuple(Case(str(i), "7" * 900_000) for i in range(5)))
    r = grade(many, "input()\nprint('7' * 900_000)")
    assert r.passed and r.results == [Code.PASSED] * 5, r.reason


def test_a_runs_own_4_mib_and_every_tests_output_at_its_limit_fit_together():
    # 100 tests, each printing exactly max_output_bytes (3,000: 4,000 in base64), and 4 MiB less 2,000 bytes of
    # the program's own stderr: the record (100 x (4,000 + 20) bytes and its frame) fits the 64 bytes a test the
    # cap allows for its JSON frame; with the frame's bytes not allowed for, or the output counted 1:1, it did not
    n, limit = 100, 3000
    many = Problem("x", "stdin", tests=tuple(Case(str(i), "7" * limit) for i in range(n)))
    program = ("import sys\nif input() == '0':\n    sys.stderr.write('e' * ((4 << 20) - 2000))\n"
               f"sys.stdout.write('7' * {limit})")
    r = grade(many, program, GradeConfig(max_output_bytes=limit, stop_at_first_failure=False))
    assert r.passed and r.results == [Code.PASSED] * n, r.reason


def test_output_that_is_not_utf_8_is_compared_with_replacement_as_the_programs_answer():
    # bytes that are not UTF-8 are the program's output, read with U+FFFD in their place: a wrong answer (or a
    # pass where that is what the test expects), never a runner error
    p = Problem("bytes", "stdin", tests=(Case("1", "7"),))
    r = grade(p, "import sys\ninput()\nsys.stdout.buffer.write(b'\\xff7')")
    assert r.results == [Code.WRONG_ANSWER] and "\ufffd7" in r.reason, r.reason
    q = Problem("bytes", "stdin", tests=(Case("1", "\ufffd7"),))
    assert grade(q, "import sys\ninput()\nsys.stdout.buffer.write(b'\\xff7')").passed


@pytest.mark.parametrize("char", ["é", "\x01"], ids=["2-byte-utf8", "control"])
def test_output_near_the_per_test_limit_passes_whatever_characters_it_holds(char):
    # 1,000,000 bytes a test in 4 tests, each under the 1 MiB limit. JSON escapes both characters to 6 bytes
    # ("\u00e9", "\u0001"): a record of escaped text (12 MB, then 24 MB) outgrew the run's cap (2x every
    # test's output) and a correct program was graded "output limit exceeded"; in base64 it is 4/3 of it
    text = char * (1_000_000 // len(char.encode()))
    many = Problem("x", "stdin", tests=tuple(Case(str(i), text) for i in range(4)))
    r = grade(many, f"import sys\ninput()\nsys.stdout.write({char!r} * {len(text)})")
    assert r.passed and r.results == [Code.PASSED] * 4, r.reason
    over = Problem("x", "stdin", tests=(Case("0", char * (1_100_000 // len(char.encode()))),))  # over 1 MiB
    r = grade(over, f"import sys\ninput()\nsys.stdout.write({char!r} * {1_100_000 // len(char.encode())})")
    assert r.results == [Code.RUNTIME_ERROR] and r.reason == "output limit exceeded (1048576 bytes)", r.reason


def test_per_process_memory_is_config_memory_bytes():
    program = "def add(a, b):\n    hog = bytearray(300 << 20)\n    return a + b\n"
    assert grade(ADD, program).passed  # 300 MiB under the default 512 MiB
    r = grade(ADD, program, GradeConfig(memory_bytes=128 << 20))
    assert r.results == [Code.RUNTIME_ERROR] and "MemoryError" in r.reason, r.reason


def test_processes_and_threads_are_capped_by_config_processes():
    program = textwrap.dedent("""
        import threading
        def add(a, b):
            go = threading.Event()
            threads = [threading.Thread(target=go.wait) for _ in range(8)]
            try:
                for t in threads:
                    t.start()
            finally:
                go.set()
            return a + b
    """)
    assert grade(ADD, program).passed  # 8 threads + the program + the harness: under the default 16
    r = grade(ADD, program, GradeConfig(processes=4))
    assert r.results == [Code.RUNTIME_ERROR] and "can't start new thread" in r.reason, r.reason


@needs_ns
def test_files_written_are_capped_by_config_disk_bytes():
    program = textwrap.dedent("""
        def add(a, b):
            for i in range(3):  # 3 x 4 MiB, each file under the per-file limit (16 MiB)
                with open(f"out{i}", "wb") as f:
                    f.write(b"x" * (4 << 20))
            return a + b
    """)
    assert grade(ADD, program).passed  # 12 MiB under the default 64 MiB
    r = grade(ADD, program, GradeConfig(disk_bytes=8 << 20))
    assert r.results == [Code.RUNTIME_ERROR] and "No space left on device" in r.reason, r.reason


@pytest.mark.slow
def test_the_cpu_budget_grows_with_the_number_of_tests():
    # call-based tests are answered by one process of the program: its CPU adds up over the tests (64 x 0.18 s:
    # 11.5 s, more than the sandbox's default 10 s); each test keeps 2.8 s of its own 3 s limit in hand
    f = Problem("f", "functional", tests=tuple(Case(str(i), str(i)) for i in range(64)), func_name="f")
    program = "import time\ndef f(x):\n    end = time.process_time() + 0.18\n    while time.process_time() < end:\n" \
              "        pass\n    return x\n"
    r = grade(f, program, GradeConfig(timeout=3))
    assert r.results == [Code.PASSED] * 64, r.reason


def test_installed_packages_only_with_site_packages():
    program = "import numpy\ndef add(a, b):\n    return int(numpy.add(a, b))\n"
    assert grade(ADD, program).passed
    r = grade(ADD, program, GradeConfig(site_packages=False))
    assert r.results == [Code.RUNTIME_ERROR] and "No module named 'numpy'" in r.reason, r.reason


def test_the_hash_seed_is_fixed_so_outputs_repeat():
    # str hashes decide the order of sets and dicts of strings a program prints: PYTHONHASHSEED=0 makes a run's
    # output, and its reward, the same every time (before: python -I dropped the variable; the hash was random)
    expected = subprocess.run([sys.executable, "-c", "print(hash('abc'))"], capture_output=True, text=True,
                              check=True, env={**os.environ, "PYTHONHASHSEED": "0"}).stdout
    p = Problem("hash", "stdin", tests=(Case("", expected),))
    r = grade(p, "print(hash('abc'))")
    assert r.passed, r.reason


def test_non_ascii_input_and_output_are_utf_8():
    p = Problem("utf8", "stdin", tests=(Case("héllo wörld ✓", "✓ dlröw olléh"),))
    r = grade(p, "import sys\ns = input()\nprint(s[::-1])\nprint('débogage ✓', file=sys.stderr)")
    assert r.passed, r.reason


def test_the_isolation_asked_for_is_the_one_used_and_reported():
    # (whether it then runs: as root the run's own uid must be able to exec the interpreter, which a pyenv under a
    # private /root forbids: a runner error there, never a pass)
    r = grade(ADD, "def add(a, b):\n    return a + b\n", GradeConfig(isolation="none"))
    assert r.isolation == "none" and r.passed != r.runner_error, r.reason


def test_numeric_libraries_are_told_to_run_single_threaded():
    program = textwrap.dedent("""
        import os
        def add(a, b):
            names = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")
            return a + b if all(os.environ.get(n) == "1" for n in names) else None
    """)
    assert grade(ADD, program).passed


def test_programs_leave_no_bytecode_caches():
    # -B: with isolation "none" a program's imports would otherwise write .pyc files into the host's folders
    program = textwrap.dedent("""
        import os, sys
        open("helper.py", "w").write("X = 1\\n")
        sys.path.insert(0, os.getcwd())
        import helper
        def add(a, b):
            return a + b if not os.path.exists("__pycache__") else None
    """)
    r = grade(ADD, program)
    assert r.passed, r.reason


def test_a_module_the_program_writes_never_shadows_one_the_test_code_imports():
    # the harness runs the test code in its own process: were the working directory on its import path, a program
    # could plant fractions.py there and forge the harness's record (every test passed)
    p = Problem("add", "humaneval", prompt="def add(a, b):\n", entry_point="add",
                test="def check(candidate):\n    import fractions\n    assert candidate(2, 3) == 5\n")
    program = textwrap.dedent("""
        open("fractions.py", "w").write(
            "import json\\n"
            "dumps = json.dumps\\n"
            "json.dumps = lambda o, *a, **k: dumps({**o, 'results': [{'code': 1}]} "
            "if isinstance(o, dict) and 'nonce' in o else o, *a, **k)\\n")
        def add(a, b):
            return None
    """)
    r = grade(p, program)
    assert r.results == [Code.WRONG_ANSWER], (r.results, r.reason)


def _kill_sandbox_stage(parent: int, within: float = 60.0) -> bool:
    """SIGKILL the sandbox stage ``parent`` started, as soon as it runs (as a host's OOM killer would)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for name in os.listdir("/proc"):
            try:
                ppid = int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1])
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            except (OSError, ValueError, IndexError):
                continue
            if ppid == parent and b"sandbox_stage.py" in cmdline:
                os.kill(int(name), signal.SIGKILL)
                return True
        time.sleep(0.05)
    return False


def test_a_sandbox_failure_is_a_runner_error_never_the_programs_fault():
    killed = []
    killer = threading.Thread(target=lambda: killed.append(_kill_sandbox_stage(os.getpid())))
    killer.start()
    p = Problem("two", "stdin", tests=(Case("1", "1"), Case("2", "2")))
    r = grade(p, "import time\ntime.sleep(30)\nprint(input())", GradeConfig(timeout=40))
    killer.join()
    assert killed == [True]
    assert r.results == [Code.RUNNER_ERROR] and r.n_tests == 2 and r.runner_error and not r.passed
    assert r.reason.startswith("sandbox failure: the sandbox stage ended without a report"), r.reason
    assert r.seconds > 0 and r.isolation in ("namespaces", "none")
    assert procs_left(r.details["uid"]) == []


def ran(stdout: bytes, returncode: int | None = 0, sig: int | None = None, **flags) -> SandboxResult:
    """A sandbox result as ``run_sandboxed`` returns it, for the tests at ``_verdict``'s seam: 1 s, namespaces."""
    return SandboxResult(returncode, sig, stdout, b"", False, False, False, 1.0, "namespaces", **flags)


def test_a_record_counts_only_from_a_harness_that_exited_0():
    # the sandbox's result at _verdict's seam: a harness killed after its record, or one gone quiet with status 0
    nonce = "ab" * 16
    record = (json.dumps({"nonce": nonce, "results": [{"code": 1}]}) + "\n").encode()

    killed = _verdict(ADD, ran(record, None, signal.SIGKILL), nonce, GradeConfig())
    assert killed.results == [Code.RUNTIME_ERROR] and f"signal {int(signal.SIGKILL)}" in killed.reason
    quiet = _verdict(ADD, ran(b""), nonce, GradeConfig())
    assert quiet.results == [Code.RUNTIME_ERROR] and "without its result record" in quiet.reason
    assert _verdict(ADD, ran(record), nonce, GradeConfig()).passed  # the same record, status 0


def test_a_harness_the_program_killed_is_its_runtime_error_quoting_the_end_of_its_stderr():
    program = textwrap.dedent("""
        import os, signal
        os.write(2, b"x" * 300 + b"y" * 99 + b"\\xff" + b"z" * 400)  # not all UTF-8: read with replacement
        os.kill(os.getppid(), signal.SIGKILL)
        def add(a, b):
            return a + b
    """)
    r = grade(ADD, program)
    assert r.results == [Code.RUNTIME_ERROR] and r.n_tests == 1 and "uid" in r.details
    assert r.reason.startswith("the test harness ended without its result record: the program interfered with the "
                               "harness. "), r.reason
    assert r.reason.endswith(". " + "y" * 99 + "\ufffd" + "z" * 400), r.reason[-600:]  # the last 500 characters


@pytest.mark.parametrize("source", ["def add(a, b):\n    return a + b\n", "raise ValueError('at load')\n"],
                         ids=["ready", "load-error"])
def test_the_call_server_of_a_harness_that_is_gone_ends_in_silence(source):
    # the race behind the test above: the program kills the harness while loading, and its call server, still
    # running until the sandbox ends it, finds the harness's pipe closed. A traceback of the harness's own code
    # on stderr would then stand where the reason quotes the end of the program's stderr
    harness = Path(harness_module.__file__)
    code = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(harness.parent)!r})
        import harness
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        os.close(resp_r)  # the harness is gone: nobody reads the answers
        harness._serve({{"prelude": "", "source": {source!r}, "function": "add"}}, req_r, resp_w)
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert (res.returncode, res.stdout, res.stderr) == (0, b"", b"")


def test_only_the_record_with_this_runs_nonce_counts():
    # at _verdict's seam: whatever else reaches the harness's stdout (junk, records forged without the nonce, a
    # JSON value that is no record), the record carrying this run's nonce decides
    nonce = "cd" * 16

    def line(obj) -> bytes:
        return (json.dumps(obj) + "\n").encode()

    real = line({"nonce": nonce, "results": [{"code": -2, "reason": "AssertionError"}]})
    forged = line({"nonce": "0" * 32, "results": [{"code": 1}]}) + line({"results": [{"code": 1}]})
    for stdout in (real + forged + b"\xff not json\n" + line([1, 2]), b"junk\n" + forged + real + b"{\n"):
        r = _verdict(ADD, ran(stdout), nonce, GradeConfig())
        assert r.results == [Code.WRONG_ANSWER] and r.reason == "AssertionError", (stdout, r)


def out(text: str) -> dict:
    """A stdin test's result as the harness sends it: the program's output in base64."""
    return {"stdout_b64": base64.b64encode(text.encode()).decode()}


def test_a_harness_reporting_other_than_one_result_per_test_is_a_runner_error():
    # at _verdict's seam: the harness's own failures (too few or too many results, a value it cannot have encoded)
    # are runner errors, never the program's
    nonce = "ef" * 16
    two = Problem("two", "stdin", tests=(Case("1", "1"), Case("2", "2")))
    f = Problem("f", "functional", tests=(Case("1", "2"),), func_name="f")

    def verdict(problem: Problem, record: dict):
        stdout = (json.dumps({"nonce": nonce, **record}) + "\n").encode()
        return _verdict(problem, ran(stdout), nonce, GradeConfig(stop_at_first_failure=False))

    for record, n in (({}, 0), ({"results": []}, 0), ({"results": [out("1")]}, 1)):
        r = verdict(two, record)
        assert r.results == [Code.RUNNER_ERROR] and r.reason == f"the harness reported {n} results for 2 tests", r
        assert r.n_tests == 2 and r.seconds == 1.0 and "uid" in r.details
    r = verdict(two, {"results": [out("1"), out("2"), out("3")]})
    assert r.results == [Code.PASSED, Code.PASSED, Code.RUNNER_ERROR] and r.reason == "result for test 2 of 2", r
    # a stdin test's result with neither a code nor the program's output is the harness's failure, not an empty
    # output (which would pass a test expecting none)
    silent = Problem("silent", "stdin", tests=(Case("1", ""),))
    # nothing, or nothing readable ("MQ==!" is "1" to a decoder that skips what is not base64: never read so)
    for result in ({}, {"stdout_b64": "not base64!"}, {"stdout_b64": "MQ==!"}, {"stdout_b64": 7}):
        r = verdict(silent, {"results": [result]})
        assert r.results == [Code.RUNNER_ERROR] and r.reason == "no readable output from the harness for test 0", r
    assert verdict(silent, {"results": [out("")]}).passed
    for value in ({"zz": 1}, None):  # an unknown tag; no value at all
        r = verdict(f, {"results": [{} if value is None else {"value": value}]})
        assert r.results == [Code.RUNNER_ERROR] and r.reason.startswith("undecodable value from the harness"), r


def test_call_based_answers_are_compared_here_and_reported():
    f = Problem("f", "functional", tests=(Case("3", '"b"'),), func_name="f")
    r = grade(f, "def f(x):\n    return 'a' * 100 * x\n")
    assert r.results == [Code.WRONG_ANSWER] and r.reason == f"wrong answer on test 0: got {'a' * 200}, expected b"
    assert grade(f, "def f(x):\n    return 'b'\n").passed
    long = Problem("f", "functional", tests=(Case("3", json.dumps("b" * 300)),), func_name="f")
    r = grade(long, "def f(x):\n    return 'a'\n")  # either side is quoted up to 200 characters
    assert r.results == [Code.WRONG_ANSWER] and r.reason == f"wrong answer on test 0: got a, expected {'b' * 200}"
    # an expected output that is not JSON is the data's fault: a runner error, whatever the program returns
    broken = Problem("f", "functional", tests=(Case("3", "b"),), func_name="f")
    r = grade(broken, "def f(x):\n    return 'b'\n")
    assert r.results == [Code.RUNNER_ERROR] and r.reason.startswith("expected output of test 0 is not JSON"), r


def test_a_program_over_the_memory_cap_never_passes_and_the_reason_says_how():
    # at _verdict's seam (the real runs: the hostile memory programs): the kernel's OOM killer ended a process, or
    # the tree was held at the cap; tests that passed become runtime errors, wrong answers stay wrong answers
    nonce = "12" * 16
    two = Problem("two", "stdin", tests=(Case("1", "1"), Case("2", "2")))
    stdout = (json.dumps({"nonce": nonce, "results": [out("1"), out("3")]}) + "\n").encode()
    cfg = GradeConfig(stop_at_first_failure=False, program_memory_bytes=256 << 20)
    for flags, how in (({"memory_exceeded": True}, "the kernel's OOM killer ended a process"),
                       ({"memory_at_cap": True}, "the program reached the cap and was held there")):
        res = ran(stdout, **flags)
        r = _verdict(two, res, nonce, cfg)
        assert r.results == [Code.RUNTIME_ERROR, Code.WRONG_ANSWER] and not r.passed
        assert r.reason == f"memory limit exceeded (all processes together, 256 MiB): {how}"
        res.stdout = b""  # no record at all: the memory is still what went wrong
        r = _verdict(two, res, nonce, cfg)
        assert r.results == [Code.RUNTIME_ERROR] and r.n_tests == 2 and r.reason.endswith(how)
    fine = _verdict(two, ran(stdout), nonce, cfg)
    assert fine.results == [Code.PASSED, Code.WRONG_ANSWER] and "memory" not in fine.reason


# ------------------------------------------------------------------------------------------- scorer


def _groups():
    from rewardkit.types import Group

    he = HUMANEVAL[0]
    return [
        Group(he["task_id"], he["prompt"], [he["canonical_solution"], "    return None\n", "    return (\n"],
              metadata={"test": he["test"], "entry_point": he["entry_point"]}),
        Group("lcb-add", "add two numbers", ["print(sum(map(int, input().split())))", "print(1)"],
              metadata={k: LCB[0][k] for k in ("public_test_cases", "private_test_cases", "metadata")}),
        Group("no-tests", "write a program", ["print(1)"]),
    ]


def test_code_scorer_rewards_statuses_and_fraction():
    from rewardkit.code.execution import CodeScorer
    from rewardkit.scoring import get_scorer
    from rewardkit.types import Status

    he, lcb, none = get_scorer("code").score(_groups())
    assert he.rewards.tolist() == [1.0, 0.0, 0.0] and he.statuses == [Status.OK] * 3
    assert he.components["code"].tolist() == [1, -2, -4] and he.cost.verifier_calls == 3
    assert lcb.rewards.tolist() == [1.0, 0.0]
    assert none.statuses == [Status.ERROR] and "no-tests" in none.messages[0]  # never a silent 0
    frac = CodeScorer(reward="fraction").score(_groups()[1:2])[0]
    n = Problem.from_row(LCB[0]).n_tests
    expected_ones = sum(t["output"].strip() == "1" for t in json.loads(LCB[0]["public_test_cases"])
                        + decode_lcb_tests(LCB[0]["private_test_cases"]))
    assert frac.rewards.tolist() == [1.0, pytest.approx(expected_ones / n)]
    with pytest.raises(ValueError, match="option 'timeout'"):
        CodeScorer(timeout=0)


def test_code_scorer_runner_failure_is_an_error_status():
    from rewardkit.code.execution import CodeScorer
    from rewardkit.types import Group, Status

    g = Group("broken", "def f():\n", ["    return 1\n"], metadata={"test": "not python at all", "entry_point": "f"})
    s = CodeScorer().score([g])[0]
    assert s.statuses == [Status.ERROR] and "test code itself failed" in s.messages[0]


def test_rewardkit_score_cli_with_the_code_scorer(tmp_path):
    from rewardkit.cli.app import app
    from typer.testing import CliRunner

    rows = tmp_path / "rows.jsonl"
    with open(rows, "w") as f:
        for r in HUMANEVAL[:2]:
            f.write(json.dumps({**{k: r[k] for k in ("task_id", "prompt", "test", "entry_point")},
                                "id": r["task_id"], "responses": [r["canonical_solution"], "    pass\n"]}) + "\n")
    out = tmp_path / "scores.jsonl"
    res = CliRunner().invoke(app, ["score", str(rows), "--scorer", "code", "--out", str(out)])
    assert res.exit_code == 0, res.output
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [g["rewards"] for g in got] == [[1.0, 0.0], [1.0, 0.0]]
    assert got[0]["results"] == [[1], [-2]]
    lcb = tmp_path / "lcb.jsonl"
    lcb.write_text(json.dumps({"id": "lcb-add", "prompt": LCB[0]["question_content"], "responses": ["print(3)"],
                               **{k: LCB[0][k] for k in ("public_test_cases", "private_test_cases", "metadata")}}))
    out2 = tmp_path / "fraction.jsonl"
    res = CliRunner().invoke(app, ["score", str(lcb), "--scorer", "code", "-o", "reward=fraction", "-o", "timeout=3",
                                   "--out", str(out2)])
    assert res.exit_code == 0, res.output
    row = json.loads(out2.read_text())
    assert row["rewards"] == [pytest.approx(1 / 3)] and row["statuses"] == ["ok"]  # outputs 3, 7, 0: one of three
    res = CliRunner().invoke(app, ["score", str(lcb), "--scorer", "code", "-o", "reward=most", "--out", str(out2)])
    assert res.exit_code == 2 and "option 'reward': must be one of all, fraction, got 'most'" in res.output
