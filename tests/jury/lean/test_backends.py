"""Lean check backends against the stand-ins: subprocess (timeout, memory, heartbeats, discovery),
persistent REPL (header once, restart on timeout and growth), Kimina HTTP client; the sqlite cache."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from rewardkit.jury.lean import make_checker
from rewardkit.jury.lean.cache import VerificationCache, cache_key
from rewardkit.jury.lean.check import DEFAULT_HEADER, build_source, check_proofs, judge_run, split_header
from rewardkit.jury.lean.kimina import KiminaClient
from rewardkit.jury.lean.repl import LeanRepl
from rewardkit.jury.lean.subprocess import LeanSubprocess, LeanToolchainError, find_lean, lake_lean_path

STANDINS = Path(__file__).resolve().parents[2] / "lean_standins"
LEAN = str(STANDINS / "lean")
REPL = [sys.executable, str(STANDINS / "repl")]
sys.path.insert(0, str(STANDINS))

FORMAL = DEFAULT_HEADER + "\ntheorem test_problem (x : ℕ) (h : x + 2 = 5) : x = 3 := by\n  sorry\n"
GOOD = FORMAL.replace("  sorry\n", "  omega\n")
SORRY = FORMAL
BAD = FORMAL.replace("  sorry\n", "  exact nope\n")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); count it as dead
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] != "Z"
    except OSError:
        return False


# ---------------------------------------------------------------------------------- discovery


def test_nothing_configured_names_where_it_looked(monkeypatch, tmp_path):
    monkeypatch.delenv("LEAN_EXE", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(LeanToolchainError) as e:
        find_lean()
    msg = str(e.value)
    for needle in ("LEAN_EXE (unset)", "PATH (no `lean`)", ".elan/bin/lean (missing)", "elan", "repl:", "Kimina"):
        assert needle in msg
    assert msg.startswith(f"no Lean 4 toolchain found. Looked in: LEAN_EXE (unset); PATH (no `lean`); "
                          f"{tmp_path}/.elan/bin/lean (missing).\nConfigure one of:\n")
    for line in (  # each way to configure a checker, whole
        "  - a toolchain: install elan (https://github.com/leanprover/elan), make a Lake project that depends on",
        "    Mathlib and build it, then set LEAN_EXE=/path/to/lean (or pass lean=...) and run from that project",
        "    (cwd=...) so `import Mathlib` resolves (LEAN_PATH, or `lake env`);",
        "  - a REPL: leanprover-community/repl built in that project: LeanRepl(['lake', 'exe', 'repl'], cwd=project)",
        "    or lean='repl:lake exe repl';",
        "  - a Kimina Lean Server: KiminaClient('http://host:8000') or lean='http://host:8000' (KIMINA_URL,",
        "    KIMINA_API_KEY).",
    ):
        assert f"\n{line}\n" in msg + "\n", line
    with pytest.raises(LeanToolchainError, match="LEAN_EXE='/nope/lean' \\(not an executable file\\)"):
        monkeypatch.setenv("LEAN_EXE", "/nope/lean")
        find_lean()


def test_lean_exe_path_and_elan_are_found(monkeypatch, tmp_path):
    monkeypatch.setenv("LEAN_EXE", LEAN)
    assert find_lean() == LEAN
    monkeypatch.delenv("LEAN_EXE")
    monkeypatch.setenv("PATH", str(STANDINS))
    assert find_lean() == str(STANDINS / "lean")
    monkeypatch.setenv("PATH", str(tmp_path))
    (tmp_path / ".elan" / "bin").mkdir(parents=True)
    (tmp_path / ".elan" / "bin" / "lean").symlink_to(LEAN)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert find_lean() == str(tmp_path / ".elan" / "bin" / "lean")


def test_a_folder_is_not_a_lean_executable(monkeypatch, tmp_path):
    """A folder passes ``os.access(X_OK)``; before, ``lean=<a folder>`` and a folder at ``~/.elan/bin/lean`` were
    taken for Lean, and every check then failed in the sandbox instead of the configuration failing at once."""
    with pytest.raises(LeanToolchainError, match="does not exist or is not executable"):
        find_lean(str(tmp_path))
    monkeypatch.delenv("LEAN_EXE", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".elan" / "bin" / "lean").mkdir(parents=True)
    with pytest.raises(LeanToolchainError, match=r"\.elan/bin/lean \(not an executable file\)"):
        find_lean()


def test_a_bare_name_is_found_on_path_and_a_bad_lean_exe_falls_through(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(STANDINS))
    assert find_lean("lean") == str(STANDINS / "lean")  # the full path, not the bare name
    for bad in ("/nope/lean", str(tmp_path)):  # missing, a folder
        monkeypatch.setenv("LEAN_EXE", bad)
        assert find_lean() == str(STANDINS / "lean")


def test_lake_lean_path_of_new_and_old_lake_layouts(tmp_path):
    for d in (".lake/build/lib/lean", "build/lib", ".lake/packages/mathlib/.lake/build/lib/lean",
              ".lake/packages/batteries/.lake/build/lib/lean", "lake-packages/std/build/lib",
              "lake-packages/aesop/build/lib"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / ".lake/packages/plain/.lake/build/lib").mkdir(parents=True)
    (tmp_path / ".lake/packages/plain/.lake/build/lib/lean").write_text("a file, not a folder")
    assert lake_lean_path(tmp_path) == [str(tmp_path / d) for d in (
        ".lake/build/lib/lean", "build/lib", ".lake/packages/batteries/.lake/build/lib/lean",
        ".lake/packages/mathlib/.lake/build/lib/lean", "lake-packages/aesop/build/lib", "lake-packages/std/build/lib")]
    assert lake_lean_path(tmp_path / "missing") == []


def _toolchain(tmp_path, answer: str, code: int = 0) -> tuple[Path, Path]:
    """(an elan-like proxy that answers ``--print-prefix`` with ``answer`` and logs its cwd, a toolchain folder
    holding bin/lean)."""
    prefix = tmp_path / "toolchains" / "v4"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "lean").symlink_to(LEAN)
    proxy = tmp_path / "elan" / "lean"
    proxy.parent.mkdir()
    proxy.write_text(f"#!{sys.executable}\nimport os, sys\nopen({str(tmp_path / 'cwd')!r}, 'w').write(os.getcwd())\n"
                     f"sys.stdout.write({answer.format(prefix=prefix)!r})\nsys.exit({code})\n")
    proxy.chmod(0o755)
    return proxy, prefix


def test_an_elan_proxy_is_resolved_to_its_toolchains_lean(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    proxy, prefix = _toolchain(tmp_path, "info: syncing channel updates\n{prefix}\n")
    lean = LeanSubprocess(str(proxy), cwd=str(project), probe=False)
    assert (lean.exe, lean.readonly[0]) == (str(prefix / "bin" / "lean"), str(prefix))
    assert (tmp_path / "cwd").read_text() == str(project)  # asked where the project's lean-toolchain decides


@pytest.mark.parametrize(("answer", "code"), [("{prefix}\n", 1), ("", 0), ("/nowhere\n", 0)])
def test_a_lean_that_names_no_usable_prefix_is_used_as_it_is(tmp_path, answer, code):
    proxy, _ = _toolchain(tmp_path, answer, code)
    lean = LeanSubprocess(str(proxy), probe=False)
    assert (lean.exe, lean.readonly) == (str(proxy), [str(tmp_path)])  # the folder above its bin


def test_a_linked_lean_is_run_by_its_real_path(tmp_path):
    """The sandbox shows the toolchain's folder, not the folder of a link to it: the link is resolved."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "lean").symlink_to(LEAN)
    lean = LeanSubprocess(str(tmp_path / "bin" / "lean"), probe=False)
    assert (lean.exe, lean.readonly) == (str(STANDINS / "lean"), [str(STANDINS.parent)])


def test_the_prefix_query_is_bounded_and_a_hung_one_ignored(monkeypatch, tmp_path):
    import subprocess as sp

    asked = []

    def hang(argv, **kw):
        asked.append(kw)
        raise sp.TimeoutExpired(argv, kw["timeout"])
    monkeypatch.setattr(sp, "run", hang)
    lean = LeanSubprocess(LEAN, probe=False, cwd=str(tmp_path))
    assert (lean.exe, lean.readonly[0]) == (str(STANDINS / "lean"), str(STANDINS.parent))
    assert asked[0]["timeout"] == 60 and asked[0]["cwd"] == str(tmp_path)


def test_lean_gets_its_lean_path_and_sees_only_its_folders(monkeypatch, tmp_path):
    calls = _sandbox_said(monkeypatch)
    monkeypatch.setenv("LEAN_PATH", "/host/a:/host/b")
    lean = LeanSubprocess(LEAN, probe=False, env={"LEAN_PATH": "/x::/y", "FOO": "1"}, cwd=str(tmp_path),
                          isolation="none")
    lean.run("theorem 𝓝")
    ((argv, kw),) = calls
    assert argv == [str(STANDINS / "lean"), "--json", "--stdin"]
    assert kw["stdin"] == "theorem 𝓝".encode() and kw["network"] is False and kw["isolation"] == "none"
    assert kw["env"] == {"PATH": f"{STANDINS}:/usr/local/bin:/usr/bin:/bin", "LEAN_PATH": "/x::/y", "FOO": "1"}
    assert kw["readonly_paths"] == [str(STANDINS.parent), "/x", "/y", str(tmp_path)]
    assert kw["limits"] == lean.limits()
    calls.clear()
    LeanSubprocess(LEAN, probe=False).run("")  # the host's LEAN_PATH, when env has none
    assert calls[0][1]["env"]["LEAN_PATH"] == "/host/a:/host/b" and calls[0][1]["readonly_paths"][1:] == [
        "/host/a", "/host/b"]
    monkeypatch.delenv("LEAN_PATH")
    calls.clear()
    LeanSubprocess(LEAN, probe=False, env={"PATH": "/mine"}).run("")  # no LEAN_PATH at all; env has the last word
    assert calls[0][1]["env"] == {"PATH": "/mine"} and calls[0][1]["readonly_paths"] == [str(STANDINS.parent)]


def test_subprocess_command_and_limits(monkeypatch):
    lean = LeanSubprocess(LEAN, timeout=30, probe=False)
    assert lean.command() == [str(STANDINS / "lean"), "--json", "--stdin"]
    lim = lean.limits()
    assert (lim.wall_seconds, lim.cpu_seconds) == (30, 30 * (os.cpu_count() or 1))  # Lean is multi-threaded
    assert lim.memory_bytes == lim.program_memory_bytes == 64 << 30  # unbounded but for 64 GiB
    lim = LeanSubprocess(LEAN, memory_mb=300, probe=False).limits()
    assert lim.memory_bytes == lim.program_memory_bytes == 300 << 20
    assert (lim.file_bytes, lim.output_bytes, lim.processes, lim.open_files) == (64 << 20, 64 << 20, 512, 4096)
    assert LeanSubprocess(LEAN, probe=False).limits().wall_seconds == 300  # the default deadline
    monkeypatch.setattr(os, "cpu_count", lambda: None)  # unknown: one core
    assert LeanSubprocess(LEAN, timeout=30, probe=False).limits().cpu_seconds == 30
    repl = LeanRepl(REPL)
    assert (repl.timeout, repl.header_timeout) == (300, 600) and repl.proc is None  # started by the first proof


def test_probe_refuses_a_lean_whose_init_is_missing_wherever_it_says_so(monkeypatch):
    from rewardkit.jury.lean.check import INIT_MISSING, LeanMessage, LeanRun

    lean = LeanSubprocess(LEAN, probe=False)
    said = LeanRun([LeanMessage("error", INIT_MISSING, 1, 0)], "error", "lean wrote more output than the sandbox keeps")
    monkeypatch.setattr(lean, "run", lambda source: said)
    with pytest.raises(LeanToolchainError, match="cannot find its core library"):
        lean.probe()
    said = LeanRun([LeanMessage("error", "unknown tactic", 1, 0)], "ok")
    lean.probe()  # a Lean that answers is usable


def test_subprocess_workers_check_at_once_and_one_source_in_the_callers_thread(monkeypatch):
    import threading

    lean = LeanSubprocess(LEAN, workers=2, probe=False)
    both = threading.Barrier(2, timeout=10)
    seen = []

    def run(source):
        seen.append(threading.get_ident())
        if len(source) > 1:
            both.wait()  # returns only when the other source is being checked at the same time
        return source
    monkeypatch.setattr(lean, "run", run)
    assert lean.run_many(["ab", "cd"]) == ["ab", "cd"]
    assert lean.run_many(["x"]) == ["x"] and seen[-1] == threading.get_ident()
    lean.workers = 1
    assert lean.run_many(["y", "z"]) == ["y", "z"] and seen[-2:] == [threading.get_ident()] * 2


def test_lean_without_init_says_exactly_that():
    with pytest.raises(LeanToolchainError, match=r"exists at .* but cannot find its core library \(Init\)"):
        LeanSubprocess(LEAN, env={"LEAN_STANDIN_NO_INIT": "1"})


# --------------------------------------------------------------------------------- subprocess


def _processes_with(marker: str) -> list[int]:
    """Live processes whose environment holds ``marker`` (any user: the sandbox may run them as another uid)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker.encode() in (d / "environ").read_bytes() and _alive(int(d.name)):
                    pids.append(int(d.name))
            except OSError:
                continue
    return pids


def test_a_source_lean_cannot_be_given_fails_alone_not_the_batch():
    """A statement or proof holding a lone surrogate (a model's broken output) cannot be written as UTF-8; before,
    its UnicodeEncodeError raised out of run_many and ended the batch's scoring."""
    src = build_source(FORMAL, GOOD)[0]
    bad = src.replace("omega", "omega -- \ud800")
    good, broken = LeanSubprocess(LEAN, probe=False).run_many([src, bad])
    assert good.status == "ok" and judge_run(good, src).outcome == "accepted"
    assert broken.status == "error" and broken.error == (
        f"the source holds a lone surrogate at character {bad.index(chr(0xD800))}, which no UTF-8 text (what lean "
        "reads) can hold")
    assert judge_run(broken, bad).outcome == "inconclusive"


def test_the_repl_refuses_a_lone_surrogate_without_a_restart():
    """Before: json + UTF-8 encoding raised inside the send, read as a malformed answer, and the REPL was restarted
    (its header environments lost) for a source it was never given."""
    src = build_source(FORMAL, GOOD)[0]
    bad = src.replace("omega", "omega -- \ud800")
    repl = LeanRepl(REPL, timeout=20)
    try:
        good, broken, again = repl.run_many([src, bad, src])
        assert good.status == again.status == "ok" and judge_run(again, src).outcome == "accepted"
        assert broken.status == "error" and broken.error.startswith(
            f"the source holds a lone surrogate at character {bad.index(chr(0xD800))}")
        assert repl.restarts == 0 and repl._commands == 2  # never written, the same REPL goes on
    finally:
        repl.close()


def test_kimina_sends_the_rest_of_a_batch_when_one_source_cannot_be_sent(kimina):
    """Before: httpx's UTF-8 encoding of the body raised for one broken source, so every proof of the request
    (a batch of up to batch_size) was an error."""
    url, log = kimina
    src = build_source(FORMAL, GOOD)[0]
    bad = src.replace("omega", "omega -- \ud800")
    client = KiminaClient(url, api_key="sekret", timeout=5)
    first, broken, last = client.run_many([src, bad, src])
    assert judge_run(first, src).outcome == judge_run(last, src).outcome == "accepted"
    assert broken.status == "error" and "lone surrogate" in broken.error
    (path, req), = log
    assert [snip["id"] for snip in req["snippets"]] == ["0", "2"]  # ids keep each source's place
    assert [r.status for r in client.run_many([bad, bad])] == ["error", "error"] and len(log) == 1  # no request


def test_subprocess_timeout_kills_everything_it_started():
    marker = f"rk-test-{os.getpid()}-{id(object())}"
    lean = LeanSubprocess(LEAN, timeout=1.0, probe=False, env={"LEAN_STANDIN_SLEEP": "60", "RK_MARK": marker})
    src = build_source(FORMAL, GOOD)[0]
    run = lean.run(src)  # the stand-in would answer after 60 s: a timeout status means we did not wait
    assert run.status == "timeout" and "killed with every process it started" in run.error
    assert _processes_with(f"RK_MARK={marker}") == []
    assert judge_run(run, src).outcome == "inconclusive"


def test_subprocess_memory_limit_is_an_inconclusive_error():
    lean = LeanSubprocess(LEAN, memory_mb=300, probe=False, env={"LEAN_STANDIN_ALLOC_MB": "2000"})
    src = build_source(FORMAL, GOOD)[0]
    run = lean.run(src)
    assert run.status == "error"
    assert judge_run(run, src).outcome == "inconclusive"


def _echo(lean: LeanSubprocess) -> dict:
    (m, *_) = lean.run(GOOD).messages
    return json.loads(m.data)


def test_subprocess_passes_heartbeats():
    lean = LeanSubprocess(LEAN, max_heartbeats=12345, probe=False, env={"LEAN_STANDIN_ECHO": "1"})
    assert _echo(lean)["argv"] == ["--json", "--stdin", "-D", "maxHeartbeats=12345"]


def test_subprocess_runs_lean_in_a_clean_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-from-the-host")
    project = tmp_path / "proj"
    (project / ".lake" / "packages" / "mathlib" / ".lake" / "build" / "lib" / "lean").mkdir(parents=True)
    (project / ".lake" / "build" / "lib" / "lean").mkdir(parents=True)
    monkeypatch.delenv("LEAN_PATH", raising=False)
    lean = LeanSubprocess(LEAN, probe=False, cwd=str(project), env={"LEAN_STANDIN_ECHO": "1"})
    seen = _echo(lean)
    assert "OPENAI_API_KEY" not in seen["env"] and "sk-secret-from-the-host" not in json.dumps(seen)
    assert set(seen["env"]) <= {"PATH", "LEAN_PATH", "LEAN_STANDIN_ECHO", "LC_CTYPE"}
    assert seen["env"]["LEAN_PATH"].split(":") == [str(project / ".lake" / "build" / "lib" / "lean"), str(
        project / ".lake" / "packages" / "mathlib" / ".lake" / "build" / "lib" / "lean")]  # what `lake env` sets
    assert seen["cwd"] != str(project) and not seen["cwd"].startswith(str(project))  # a fresh working dir


WRAPPED_LEAN = """#!/usr/bin/env python3
import os, subprocess, sys
standin = os.path.join(os.path.dirname(__file__), "standin")
p = subprocess.run([sys.executable, standin, *sys.argv[1:]], stdin=sys.stdin, capture_output=True, text=True)
sys.stdout.write(p.stdout + {extra!r})
sys.stderr.write(p.stderr)
sys.exit(p.returncode)
"""


@pytest.mark.parametrize("extra", [
    # lean's JSON error for the proof, cut short
    '{"caption":"","data":"unknown tactic","endPos":{"column":9,"line":9},"fileName":"<stdin>","isSil\n',
    # the same error with its severity key lost
    '{"caption":"","data":"unknown tactic","endPos":{"column":9,"line":9},"fileName":"<stdin>",'
    '"isSilent":false,"keepFullRange":false,"kind":"[anonymous]","pos":{"column":2,"line":9}}\n',
    '{"severity": "error", "data": "unknown tactic", "pos": {"line": "nine"}}\n',  # a position of another shape
    '{"severity": "error", "data": "unknown tactic", "pos": [9, 2]}\n',
])
def test_a_lean_json_line_that_is_not_a_message_leaves_the_proof_inconclusive(extra):
    """Before, such a line was skipped: the error it carried was lost and the proof, good in every other line
    (its axiom report included), was accepted."""
    root = Path(tempfile.mkdtemp(prefix="rk-lean-"))  # not under pytest's 0700 folders: the sandbox's uid reads it
    try:
        shutil.copytree(STANDINS, root / "bin", ignore=shutil.ignore_patterns("__pycache__"))
        exe = (root / "bin" / "lean").rename(root / "bin" / "standin").with_name("lean")
        exe.write_text(WRAPPED_LEAN.format(extra=extra))
        exe.chmod(0o755)
        root.chmod(0o755)
        (a,) = check_proofs(LeanSubprocess(str(exe), probe=False), [(FORMAL, GOOD)])
    finally:
        shutil.rmtree(root)
    assert a.outcome == "inconclusive", a
    assert f"{exe} --json printed 1 line(s) that are not a Lean message, first: {extra.strip()[:200]!r}" in a.reasons[0]
    (plain,) = check_proofs(LeanSubprocess(LEAN, probe=False), [(FORMAL, GOOD)])
    assert plain.outcome == "accepted"  # the same proof, with nothing added to Lean's output


LEAN_ERROR = ('{"caption":"","data":"unknown tactic","endPos":{"column":9,"line":9},"fileName":"<stdin>",'
              '"isSilent":false,"keepFullRange":false,"kind":"[anonymous]","pos":{"column":2,"line":9},"severity":"error"}')


def _sandbox_said(monkeypatch, **result):
    """Make the sandbox report ``result`` (a SandboxResult's fields) for every run; returns the calls it saw."""
    from rewardkit.code.sandbox import SandboxResult

    calls = []
    fields = dict(returncode=0, signal=None, stdout=b"", stderr=b"", timed_out=False, cpu_exceeded=False,
                  output_truncated=False, seconds=0.1, isolation_used="none") | result

    def fake(argv, **kw):
        calls.append((list(argv), kw))
        return SandboxResult(**fields)
    monkeypatch.setattr("rewardkit.jury.lean.subprocess.run_sandboxed", fake)
    return calls


@pytest.mark.parametrize(("result", "status", "error"), [
    (dict(error="unshare: operation not permitted"), "error", "in the sandbox: unshare: operation not permitted"),
    (dict(timed_out=True, returncode=None, signal=9), "timeout", "lean exceeded 7s; killed with every process"),
    (dict(cpu_exceeded=True, returncode=None, signal=24), "timeout", "lean exceeded 7s; killed with every process"),
    (dict(output_truncated=True, returncode=None, signal=9), "error", "more output than the sandbox keeps"),
    (dict(stderr=b"unknown module prefix 'Init'\n", returncode=1), "error", "cannot load its core library"),
    (dict(returncode=None, signal=11), "error", "lean killed by signal 11"),
    (dict(returncode=134, stderr=b"INTERNAL PANIC: out of memory"), "error", "lean exited 134 without a Lean error"),
    (dict(returncode=1, stderr=b"uncaught exception: file not found"), "error",
     "lean exited 1 without a Lean error: uncaught exception: file not found"),
    (dict(returncode=1, stdout=LEAN_ERROR.encode() + b"\n"), "ok", None),  # Lean's own error: a verdict
    (dict(returncode=0, stdout=b"not json, ignored\n  " + LEAN_ERROR.encode() + b"  \n"), "ok", None),
])
def test_what_the_sandbox_saw_becomes_a_typed_lean_run(monkeypatch, result, status, error):
    """Every way ``lean`` did not finish is an error or timeout (inconclusive), never a run Lean judged; Lean's own
    messages (exit 1 with an error, exit 0) are a run to judge."""
    _sandbox_said(monkeypatch, **result)
    run = LeanSubprocess(LEAN, timeout=7, probe=False).run(GOOD)
    assert run.status == status and (error is None and run.error is None or error in run.error), run
    if status != "ok":
        assert judge_run(run, GOOD).outcome == "inconclusive"
    else:
        assert [(m.severity, m.line, m.column, m.data) for m in run.messages] == [("error", 9, 2, "unknown tactic")]


def test_a_signal_under_a_memory_limit_says_so_and_long_output_is_cut(monkeypatch):
    _sandbox_said(monkeypatch, returncode=None, signal=9)
    assert LeanSubprocess(LEAN, memory_mb=300, probe=False).run(GOOD).error == "lean killed by signal 9 (memory limit?)"
    assert LeanSubprocess(LEAN, probe=False).run(GOOD).error == "lean killed by signal 9"
    _sandbox_said(monkeypatch, returncode=2, stderr=b"x" * 10 + b"y" * 500 + b"\n")
    assert LeanSubprocess(LEAN, probe=False).run(GOOD).error == "lean exited 2 without a Lean error: " + "y" * 500
    bad = "{" + "z" * 300
    _sandbox_said(monkeypatch, stdout=bad.encode())
    run = LeanSubprocess(LEAN, probe=False).run(GOOD)
    assert run.error.endswith(f"--json printed 1 line(s) that are not a Lean message, first: {bad[:200]!r}")


def test_subprocess_parallel_workers_keep_order():
    lean = LeanSubprocess(LEAN, workers=2)
    res = check_proofs(lean, [(FORMAL, GOOD), (FORMAL, SORRY), (FORMAL, BAD), (FORMAL, GOOD)])
    assert [a.outcome for a in res] == ["accepted", "rejected", "rejected", "accepted"]


# -------------------------------------------------------------------------------------- REPL


def test_repl_sends_the_header_once_and_checks_proofs():
    repl = LeanRepl(REPL, timeout=20)
    try:
        res = check_proofs(repl, [(FORMAL, GOOD), (FORMAL, SORRY), (FORMAL, BAD)])
        assert [a.outcome for a in res] == ["accepted", "rejected", "rejected"]
        assert "uses sorry" in res[1].reasons
        # positions are reported against the whole source (header lines added back)
        assert res[2].reasons[0].startswith(f"error {DEFAULT_HEADER.count(chr(10)) + 3}:8: Unknown identifier")
        assert list(repl._envs.values()) == [0] and repl._commands == 3 and repl.restarts == 0
    finally:
        repl.close()


def test_repl_restarts_after_a_timeout(tmp_path):
    pidfile = tmp_path / "pids"
    repl = LeanRepl(REPL, timeout=1.0, env={"LEAN_STANDIN_HANG_ON": "HANG", "LEAN_STANDIN_PIDFILE": str(pidfile)})
    try:
        hang = build_source(FORMAL, GOOD.replace("omega", "omega -- HANG"))[0]
        t0 = time.perf_counter()
        run = repl.run(hang)
        assert (run.status, run.error, repl.restarts) == ("timeout", "REPL command exceeded 1s; REPL restarted", 1)
        assert 1.0 <= run.seconds <= time.perf_counter() - t0
        first = int(pidfile.read_text().split()[0])
        assert not _alive(first)
        good = build_source(FORMAL, GOOD)[0]
        assert judge_run(repl.run(good), good).accepted  # the fresh REPL works
    finally:
        repl.close()


def test_a_repl_that_died_between_proofs_is_replaced_with_its_header_sent_again(tmp_path):
    """Before, the environment the dead REPL had made was sent to the fresh one ("Unknown environment")."""
    pidfile = tmp_path / "pids"
    repl = LeanRepl(REPL, timeout=20, env={"LEAN_STANDIN_PIDFILE": str(pidfile)})
    try:
        good = build_source(FORMAL, GOOD)[0]
        assert judge_run(repl.run(good), good).accepted
        os.killpg(int(pidfile.read_text().split()[0]), signal.SIGKILL)
        repl.proc.wait()
        assert judge_run(repl.run(good), good).accepted
        assert len(pidfile.read_text().split()) == 2  # a second REPL, started for the second proof
    finally:
        repl.close()


HOG = """import os, subprocess, sys, time
hog = bytearray(int(sys.argv[1]) << 20)
hog[::4096] = b"\\x01" * len(hog[::4096])  # touched, so resident
kids = [subprocess.Popen([sys.executable, __file__, a]) for a in sys.argv[2:]]
print("ready", flush=True)
time.sleep(60)
"""


def test_group_rss_counts_every_process_of_the_group_and_only_them(tmp_path):
    """Checked against ``ps`` (procps reads the same kernel counter, in KiB): the group of a leader holding
    60 MiB and its child holding 40 MiB, in our session but not our group."""
    from rewardkit.jury.lean.repl import _group_rss_mb

    script = tmp_path / "hog.py"
    script.write_text(HOG)
    lead = subprocess.Popen([sys.executable, str(script), "60", "40"], stdout=subprocess.PIPE, process_group=0)
    try:
        assert [lead.stdout.readline(), lead.stdout.readline()] == [b"ready\n"] * 2  # both hold their memory
        rows = [r.split() for r in subprocess.run(["ps", "-e", "-o", "pgid=,rss="], capture_output=True,
                                                  text=True).stdout.splitlines()]
        mine = [int(kb) for pgid, kb in rows if int(pgid) == lead.pid]
        assert len(mine) == 2 and min(mine) > 40 << 10
        assert _group_rss_mb(lead.pid) == pytest.approx(sum(mine) / 1024, abs=0.01)
        assert 100 < _group_rss_mb(lead.pid) < 200
    finally:
        os.killpg(lead.pid, signal.SIGKILL)
        lead.wait()


def test_repl_recycles_when_memory_grows():
    repl = LeanRepl(REPL, max_rss_mb=150, env={"LEAN_STANDIN_GROW_MB": "80"})
    try:
        good = build_source(FORMAL, GOOD)[0]
        for _ in range(3):
            assert judge_run(repl.run(good), good).accepted
        assert repl.restarts >= 1
    finally:
        repl.close()


FIXED_REPL = """import sys
reply = sys.argv[1]
buf = ""
for line in sys.stdin:
    if line.strip():
        buf += line
    elif buf:
        sys.stdout.write(reply + "\\n\\n")
        sys.stdout.flush()
        buf = ""
"""


@pytest.mark.parametrize(("reply", "why"), [
    ("uncaught exception: out of memory", "answered with something other than a JSON object: 'uncaught exception"),
    ("[0, 1]", "answered with something other than a JSON object: '[0, 1]'"),
    ("X-Lean: out of memory", "answered with something other than a JSON object: 'X-Lean: out of memory'"),
    ("Z" * 300, f"answered with something other than a JSON object: {'Z' * 200!r}"),  # its first 200 characters
    ('{"env": 0, "messages": ["error"]}', "answered a malformed response (AttributeError"),
    ('{"env": 0, "messages": [{"severity": "error", "pos": {"line": "x"}}]}',
     "answered a malformed response (ValueError: invalid literal for int()"),
    ('{"env": 0, "messages": [{"severity": "fatal", "data": "unknown tactic"}]}',
     "answered a malformed response (ValueError: a message whose severity is 'fatal'"),
    # before, the KeyError of an end position without its line escaped run_many
    ('{"env": 0, "messages": [{"severity": "error", "pos": {"line": 1, "column": 0}, "endPos": {"column": 3}}]}',
     "answered a malformed response (KeyError: 'line')"),
])
def test_a_repl_that_answers_garbage_leaves_each_proof_inconclusive_naming_it(tmp_path, reply, why):
    """Before, a reply that was not a JSON object (or held a message of another shape) raised out of ``run_many``
    (JSONDecodeError, AttributeError), ending the whole batch instead of leaving each proof inconclusive."""
    script = tmp_path / "repl.py"
    script.write_text(FIXED_REPL)
    repl = LeanRepl([sys.executable, str(script), reply], timeout=20)
    try:
        res = check_proofs(repl, [(FORMAL, GOOD), (FORMAL, SORRY)])
    finally:
        repl.close()
    assert [a.outcome for a in res] == ["inconclusive", "inconclusive"], res
    assert why in res[0].reasons[0] and f"REPL {sys.executable} {script}" in res[0].reasons[0], res[0].reasons
    assert repl.restarts == 2  # each garbage answer killed that REPL; the next proof got a fresh one


def test_the_repls_info_severity_is_leans_information(tmp_path):
    """The REPL writes Lean's information severity as "info" (REPL/JSON.lean ``Message.of``; its own test
    def_eval.expected.out: ``{"severity": "info", ...}``), and so does Kimina, which serves it. Before, that
    message was refused as malformed: the axiom report of every proof a real REPL checked was lost and each
    proof was inconclusive (the stand-ins wrote "information", so no test saw it)."""
    src = build_source(FORMAL, GOOD)[0]
    line = src.count("\n") - 2  # the #print axioms line, counted after the two import lines the header took
    reply = json.dumps({"sorries": [], "messages": [{"severity": "info", "pos": {"line": line, "column": 0},
                        "endPos": {"line": line, "column": 6},
                        "data": "'test_problem' depends on axioms: [propext, Quot.sound]"}], "env": 0})
    script = tmp_path / "repl.py"
    script.write_text(FIXED_REPL)
    repl = LeanRepl([sys.executable, str(script), reply], timeout=20)
    try:
        run = repl.run(src)
    finally:
        repl.close()
    assert run.status == "ok" and [m.severity for m in run.messages] == ["information"]
    assert judge_run(run, src).outcome == "accepted" and judge_run(run, src).axioms == ("propext", "Quot.sound")
    repl = LeanRepl([sys.executable, str(script), reply.replace('"info"', '"trace"')], timeout=20)
    try:
        (trace,) = repl.run_many([src])
    finally:
        repl.close()
    assert trace.status == "error" and "severity is 'trace'" in trace.error  # none of Lean's three: refused


SCRIPTED_REPL = """import os, sys
answers = sys.argv[1:]
log = os.environ.get("RK_LOG")
sys.stderr.write("repl chatter on stderr\\n")
sys.stderr.flush()
if log:
    with open(log, "a", encoding="utf-8") as f:
        f.write(json.dumps({"cwd": os.getcwd(), "env": dict(os.environ), "pid": os.getpid()}) + "\\x1d")
buf, k = "", 0
for line in sys.stdin:
    if line.strip():
        buf += line
    elif buf:
        if log:
            with open(log, "a", encoding="utf-8") as f:
                f.write(buf + "\\x1d")
        answer = answers[min(k, len(answers) - 1)]
        if answer == "EXIT":  # half an answer, then gone
            sys.stdout.write('{"env": ')
            sys.stdout.flush()
            sys.exit(0)
        if answer.endswith("QUIT"):  # a whole answer, then gone
            sys.stdout.write(answer[:-4])
            sys.stdout.flush()
            sys.exit(0)
        if "|||" in answer:  # a write, a pause, then the rest: an answer in two reads, or output after an answer
            first, rest = answer.split("|||", 1)
            sys.stdout.write(first)
            sys.stdout.flush()
            time.sleep(0.3)
            sys.stdout.write(rest)
            sys.stdout.flush()
            buf, k = "", k + 1
            continue
        if answer.endswith("CLOSE"):  # a whole answer, then no more output, alive
            sys.stdout.write(answer[:-5])
            sys.stdout.flush()
            os.close(1)
            open(os.environ["RK_CLOSED"], "w").close()
            time.sleep(60)
        sys.stdout.write(answer)
        sys.stdout.flush()
        buf, k = "", k + 1
""".replace("import os, sys", "import json, os, sys, time")


def _scripted(tmp_path, *answers: str, **kw) -> LeanRepl:
    """A REPL that writes ``answers[k]`` (verbatim, in one write) for its k-th request, the last one after that
    ("A|||B": A, then B 0.3 s later; "EXIT": half an answer, then it exits; an answer ending in "QUIT": that answer, then it exits; in "CLOSE":
    that answer, then it closes its output, touches ``$RK_CLOSED`` and lives on); with ``env={"RK_LOG": path}`` it logs how it was started and each
    request it read (``_log``)."""
    script = tmp_path / "scripted_repl.py"
    script.write_text(SCRIPTED_REPL)
    return LeanRepl([sys.executable, str(script), *answers], **({"timeout": 20} | kw))


def _run_once(tmp_path, src: str, *answers: str) -> tuple:
    """One check of ``src`` on a scripted REPL (``_scripted``), the REPL closed after it."""
    repl = _scripted(tmp_path, *answers)
    try:
        return repl.run(src), repl
    finally:
        repl.close()


def _until_readable(repl: LeanRepl) -> None:
    """Wait (up to 20 s) until the REPL's output pipe holds something not yet read, without reading it: a scripted
    REPL's late write ("A|||B") has arrived, however slowly a busy machine ran it."""
    ready, _, _ = select.select([repl.proc.stdout], [], [], 20)
    assert ready, "the scripted REPL wrote nothing more within 20 s"


def _log(path) -> tuple[list[dict], list[dict]]:
    """(how each REPL was started, the requests they read) from a scripted REPL's log."""
    items = [json.loads(x) for x in Path(path).read_text(encoding="utf-8").split("\x1d") if x.strip()]
    return [x for x in items if "pid" in x], [x for x in items if "pid" not in x]


def _accepting(src: str) -> str:
    """The REPL's answer to ``src``'s body that accepts it: only the axiom report, at its line after the header."""
    line = src.count("\n") - 2  # the #print axioms line, less the two import lines the header took
    return json.dumps({"env": 1, "messages": [{"severity": "info", "pos": {"line": line, "column": 0},
                       "endPos": {"line": line, "column": 6},
                       "data": "'test_problem' depends on axioms: [propext]"}]}) + "\n\n"


def test_a_repl_answer_with_neither_env_nor_message_is_inconclusive(tmp_path):
    """The REPL answers a command with its new environment or with a refusal; an answer with neither is not its
    protocol. Before, it was read as Lean saying nothing, so a good proof was rejected (and that verdict cached)."""
    src = build_source(FORMAL, GOOD)[0]
    repl = _scripted(tmp_path, '{"env": 0}\n\n', "{}\n\n")
    try:
        run = repl.run(src)
    finally:
        repl.close()
    assert run.status == "error" and "an answer with neither 'env' nor 'message': {}" in run.error, run.error
    assert judge_run(run, src).outcome == "inconclusive" and repl.restarts == 1 and 0 < run.seconds < 20


def test_output_the_repl_wrote_after_its_answer_is_not_read_as_the_next_answer(tmp_path):
    """A REPL that wrote a second answer after the header's: before, that stray answer was read as the proof's,
    so a proof with an error was accepted on an answer Lean never gave it."""
    src = build_source(FORMAL, BAD)[0]
    rejecting = json.dumps({"env": 1, "messages": [{"severity": "error", "pos": {"line": 8, "column": 8},
                            "endPos": {"line": 8, "column": 12}, "data": "Unknown identifier `nope`"}]}) + "\n\n"
    repl = _scripted(tmp_path, '{"env": 0}\n\n' + _accepting(src), rejecting)
    try:
        run = repl.run(src)
    finally:
        repl.close()
    assert run.status == "error" and "wrote output that answers no request: '{\"env\": 1" in run.error, run.error
    assert judge_run(run, src).outcome == "inconclusive" and repl.restarts == 1


def test_output_the_repl_wrote_while_idle_is_read_before_the_next_request(tmp_path):
    """Stray output that reaches the pipe after an answer was read (not in the same read) is drained before the
    next request, so it is refused rather than read as that request's answer."""
    src = build_source(FORMAL, BAD)[0]
    rejecting = json.dumps({"env": 1, "messages": []}) + "\n\n"
    repl = _scripted(tmp_path, '{"env": 0}\n\n', _accepting(src) + "|||" + rejecting)
    try:
        first = repl.run(src)
        _until_readable(repl)  # the stray answer is in the pipe now
        second = repl.run(src)
    finally:
        repl.close()
    assert first.status == "ok" and judge_run(first, src).outcome == "accepted"
    assert second.status == "error" and "wrote output that answers no request: '{\"env\": 1" in second.error
    assert repl.restarts == 1


def test_stray_output_is_quoted_whole_when_it_came_in_two_reads(tmp_path):
    """Stray output read with the last answer and more that arrived while idle are one stray text: the refusal
    quotes both, in order, so the log shows what the REPL wrote."""
    src = build_source(FORMAL, GOOD)[0]
    repl = _scripted(tmp_path, '{"env": 0}\n\n', _accepting(src) + "AAAA|||BBBB")
    try:
        first = repl.run(src)
        _until_readable(repl)  # "BBBB" is in the pipe now
        second = repl.run(src)
    finally:
        repl.close()
    assert first.status == "ok" and second.status == "error"
    assert second.error.endswith("wrote output that answers no request: 'AAAABBBB'"), second.error


def test_a_line_of_spaces_before_an_answer_is_not_its_protocol(tmp_path):
    """The REPL ends each answer with a blank line; a line holding only a space is neither blank nor JSON, so the
    answer after it is not taken on trust."""
    src = build_source(FORMAL, GOOD)[0]
    run, repl = _run_once(tmp_path, src, ' \n\n{"env": 0}\n\n')
    assert run.status == "error" and "answered with something other than a JSON object: ' '" in run.error, run.error
    assert repl.restarts == 1


def test_an_answer_that_arrives_in_two_reads_is_read_whole(tmp_path):
    src = build_source(FORMAL, GOOD)[0]
    answer = _accepting(src)
    run, repl = _run_once(tmp_path, src, '{"env": 0}\n\n', answer[:40] + "|||" + answer[40:])
    assert run.status == "ok" and judge_run(run, src).outcome == "accepted" and repl.restarts == 0


def test_a_header_answer_without_env_or_message_is_quoted_whole(tmp_path):
    src = build_source(FORMAL, GOOD)[0]
    run, _ = _run_once(tmp_path, src, '{"envs": 0}\n\n')
    assert run.status == "error" and run.error == "REPL rejected the header: {'envs': 0}"


def test_stray_output_is_quoted_to_its_first_200_characters(tmp_path):
    src = build_source(FORMAL, GOOD)[0]
    repl = _scripted(tmp_path, '{"env": 0}\n\n' + "W" * 300)
    try:
        run = repl.run(src)
    finally:
        repl.close()
    assert run.error == f"REPL {shlex.join(repl.cmd)} wrote output that answers no request: {'W' * 200!r}"


def test_a_header_message_of_the_wrong_shape_is_inconclusive(tmp_path):
    """Before, the header's messages were read by their "severity" key alone, so an error without one was
    skipped, the header taken as good and the proof judged in an environment that failed to import."""
    src = build_source(FORMAL, GOOD)[0]
    repl = _scripted(tmp_path, '{"env": 0, "messages": [{"data": "unknown module prefix \'Mathlib\'"}]}\n\n',
                     _accepting(src))
    try:
        run = repl.run(src)
    finally:
        repl.close()
    assert run.status == "error" and "severity is None" in run.error, run.error
    assert judge_run(run, src).outcome == "inconclusive"


def test_repl_sends_each_header_once_and_each_body_in_its_headers_environment(tmp_path):
    log = tmp_path / "log"
    answers = [f'{{"env": {n}}}\n\n' for n in (7, 8, 9, 10)]
    repl = _scripted(tmp_path, *answers, env={"RK_LOG": str(log)})
    one = build_source(FORMAL, GOOD.replace("omega", "simp [𝓝]"))[0]  # 𝓝 (U+1D4DD): beyond the BMP
    two = one.replace("import Aesop\n", "")
    try:
        assert [r.status for r in repl.run_many([one, two, one])] == ["ok", "ok", "ok"]
    finally:
        repl.close()
    head, body = one.split("import Aesop\n", 1)
    assert _log(log)[1] == [{"cmd": head + "import Aesop\n"}, {"cmd": body, "env": 7},
                            {"cmd": "import Mathlib\n"}, {"cmd": body, "env": 9}, {"cmd": body, "env": 7}]
    # written as UTF-8, not as \\u escapes: Lean's JSON reads a surrogate pair as two broken characters
    assert "𝓝" in log.read_text(encoding="utf-8") and "\\ud835" not in log.read_text(encoding="utf-8")


@pytest.mark.parametrize(("answer", "status", "error"), [
    ('{"message": "Could not parse JSON"}\n\n', "error", "REPL rejected the header: Could not parse JSON"),
    ('{"env": 0, "messages": [{"severity": "error", "pos": {"line": 1, "column": 0}, "data": "unknown package '
     '\'Mathlib\'"}]}\n\n', "error", "header failed: unknown package 'Mathlib'"),
])
def test_a_header_the_repl_refused_or_failed_is_inconclusive(tmp_path, answer, status, error):
    src = build_source(FORMAL, GOOD)[0]
    repl = _scripted(tmp_path, answer)
    try:
        run = repl.run(src)
        assert run.status == status and run.error == error and repl._envs == {}  # nothing kept for next time
    finally:
        repl.close()
    assert judge_run(run, src).outcome == "inconclusive"


def test_a_header_that_hangs_times_out_and_restarts_the_repl(tmp_path):
    pidfile = tmp_path / "pids"
    repl = LeanRepl(REPL, timeout=20, header_timeout=0.5,
                    env={"LEAN_STANDIN_HANG_ON": "import Aesop", "LEAN_STANDIN_PIDFILE": str(pidfile)})
    src = build_source(FORMAL, GOOD)[0]
    try:
        t0 = time.perf_counter()
        run = repl.run(src)
        assert time.perf_counter() - t0 < 10  # the header's own deadline, not the proof's
        assert (run.status, run.error, repl.restarts, repl.proc) == ("timeout", "REPL header took over 0.5s", 1, None)
        assert not _alive(int(pidfile.read_text().split()[0]))
        assert judge_run(run, src).outcome == "inconclusive"
    finally:
        repl.close()


def test_a_repl_refusing_a_proof_is_inconclusive_naming_it(tmp_path):
    src = build_source(FORMAL, GOOD)[0]
    repl = _scripted(tmp_path, '{"env": 0}\n\n', '{"message": "Unknown environment."}\n\n', max_commands=1)
    try:
        run = repl.run(src)
    finally:
        repl.close()
    assert (run.status, run.error) == ("error", "REPL: Unknown environment.")
    assert judge_run(run, src).outcome == "inconclusive"
    assert repl.restarts == 1  # a refused command counts toward max_commands as an answered one does


def test_a_repl_that_exits_mid_answer_is_inconclusive(tmp_path):
    src = build_source(FORMAL, GOOD)[0]
    repl = _scripted(tmp_path, '{"env": 0}\n\n', "EXIT")
    try:
        run = repl.run(src)
        assert run.status == "error" and run.error == f"REPL {shlex.join(repl.cmd)} exited" and repl.restarts == 1
    finally:
        repl.close()
    assert judge_run(run, src).outcome == "inconclusive" and 0 < run.seconds < 20


def test_a_repl_that_exits_after_answering_the_header_is_inconclusive(tmp_path):
    src = build_source(FORMAL, GOOD)[0]
    run, repl = _run_once(tmp_path, src, '{"env": 0}\n\nQUIT')
    assert run.status == "error" and run.error == f"REPL {shlex.join(repl.cmd)} exited" and repl.restarts == 1


def test_a_repl_whose_output_ended_is_inconclusive_not_waited_on(tmp_path):
    """Its output closed after the header's answer while the process lives on: the next proof reads the end of
    that output and is inconclusive at once."""
    closed = tmp_path / "closed"
    src = build_source(FORMAL, GOOD)[0]
    repl = _scripted(tmp_path, '{"env": 0}\n\nCLOSE', env={"RK_CLOSED": str(closed)})
    try:
        repl._live()
        assert repl._env_for(split_header(src)[0]) == 0
        for _ in range(200):
            if closed.exists():
                break
            time.sleep(0.05)
        run = repl.run(src)
    finally:
        repl.close()
    assert run.status == "error" and run.error == f"REPL {shlex.join(repl.cmd)} exited" and repl.restarts == 1


def test_a_repl_that_stopped_reading_is_inconclusive(tmp_path):
    """Our request meets a broken pipe. Before, closing that pipe (with the request still in its buffer) raised
    BrokenPipeError out of the restart, so ``run_many`` ended the whole batch instead of this proof failing."""
    closed = tmp_path / "closed"
    deaf = tmp_path / "deaf.py"  # closes its stdin and lives on
    deaf.write_text(f"import os, time\nos.close(0)\nopen({str(closed)!r}, 'w').close()\ntime.sleep(60)\n")
    src = build_source(FORMAL, GOOD)[0]
    repl = LeanRepl([sys.executable, str(deaf)], timeout=20)
    try:
        repl._live()
        for _ in range(200):
            if closed.exists():
                break
            time.sleep(0.05)
        (run,) = repl.run_many([src])
        assert run.status == "error" and run.error == f"REPL {shlex.join(repl.cmd)} exited" and repl.restarts == 1
    finally:
        repl.close()
    assert judge_run(run, src).outcome == "inconclusive"


def test_repl_answers_after_extra_blank_lines_are_read(tmp_path):
    """Answers followed by more than one blank line (leading newlines of the next answer) are still answers."""
    src = build_source(FORMAL, GOOD)[0]
    repl = _scripted(tmp_path, '{"env": 0}\n\n\n\n', "\r\n\n" + _accepting(src))
    try:
        assert judge_run(repl.run(src), src).outcome == "accepted"
    finally:
        repl.close()


def test_repl_runs_in_cwd_with_a_clean_environment_and_a_command_line_string(monkeypatch, tmp_path, capfd):
    for k in ("PATH", "HOME", "ELAN_HOME", "LEAN_PATH", "LEAN_SYSROOT", "LAKE_HOME", "LANG", "LC_ALL"):
        monkeypatch.setenv(k, os.environ.get(k, f"/kept/{k}"))
    monkeypatch.setenv("LANG", "host-lang")  # ``env`` has the last word
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-from-the-host")
    log = tmp_path / "log"
    (tmp_path / "scripted_repl.py").write_text(SCRIPTED_REPL)
    repl = LeanRepl(f"{shlex.quote(sys.executable)} scripted_repl.py '{{\"env\": 0}}\n\n'", cwd=str(tmp_path),
                    env={"RK_LOG": str(log), "LANG": "C.UTF-8"})
    try:
        assert repl.cmd == [sys.executable, "scripted_repl.py", '{"env": 0}\n\n']
        assert repl.run(build_source(FORMAL, GOOD)[0]).status == "ok"
    finally:
        repl.close()
    (started,), _ = _log(log)
    assert started["cwd"] == str(tmp_path)
    assert "repl chatter" not in capfd.readouterr().err  # its stderr is not mixed into ours
    expect = {k: os.environ[k] for k in ("PATH", "HOME", "ELAN_HOME", "LEAN_PATH", "LEAN_SYSROOT", "LAKE_HOME",
                                         "LC_ALL")} | {"RK_LOG": str(log), "LANG": "C.UTF-8"}
    assert {k: v for k, v in started["env"].items() if k != "LC_CTYPE"} == expect  # LC_CTYPE: Python's own
    from rewardkit.jury.lean.repl import clean_env

    assert clean_env(None)["LANG"] == "host-lang"  # the host's locale is kept when ``env`` does not set one


def test_repl_close_kills_the_repl_and_forgets_its_environments(tmp_path):
    pidfile = tmp_path / "pids"
    repl = LeanRepl(REPL, timeout=20, env={"LEAN_STANDIN_PIDFILE": str(pidfile)})
    good = build_source(FORMAL, GOOD)[0]
    t0 = time.perf_counter()
    run = repl.run(good)
    assert 0 < run.seconds <= time.perf_counter() - t0 and run.seconds < 2  # no timer waited on (the stand-in is quick)
    assert repl._envs and repl._commands == 1
    repl.close()
    assert repl.proc is None and repl._envs == {} and repl._commands == 0 and repl.restarts == 0
    assert not _alive(int(pidfile.read_text().split()[0]))


def test_a_repl_that_cannot_start_leaves_each_proof_inconclusive(tmp_path):
    """Before, the FileNotFoundError of a missing program raised out of ``run_many``."""
    repl = LeanRepl([str(tmp_path / "no-such-repl")], timeout=5)
    res = check_proofs(repl, [(FORMAL, GOOD), (FORMAL, GOOD)])
    assert [a.outcome for a in res] == ["inconclusive", "inconclusive"]
    assert f"REPL {tmp_path / 'no-such-repl'} could not start: [Errno 2]" in res[1].reasons[0], res[1].reasons


def test_repl_memory_limit_is_the_most_a_repl_may_hold(monkeypatch):
    import rewardkit.jury.lean.repl as repl_module

    held = []
    monkeypatch.setattr(repl_module, "_group_rss_mb", lambda pgid: held[-1])
    repl = LeanRepl(REPL, max_rss_mb=150)
    good = build_source(FORMAL, GOOD)[0]
    try:
        held.append(150.0)
        assert judge_run(repl.run(good), good).accepted and repl.restarts == 0  # at the limit: kept
        held.append(150.5)
        assert judge_run(repl.run(good), good).accepted and repl.restarts == 1  # over it: recycled
    finally:
        repl.close()


def test_group_rss_skips_processes_it_cannot_read(monkeypatch, tmp_path):
    """A process that ended while /proc was read, or whose files do not parse, is skipped; the rest are counted."""
    import rewardkit.jury.lean.repl as repl_module

    proc = tmp_path / "proc"
    for pid, stat, status in (("7", "7 (lean) S 1 42 42 0", "Name:\tlean\nVmRSS:\t  1024 kB\n"),
                              ("8", None, None),  # gone: no files
                              ("9", "9 no parenthesis", "VmRSS:\t 4096 kB\n"),
                              ("10", "10 (a) b) S 1 42 42", "VmRSS:\t 512 kB\n"),  # a ')' in its name
                              ("11", "11 (lake) S 1 43 43", "VmRSS:\t 2048 kB\n"),  # another group
                              ("12", "12 (x) S 1 notanumber", "VmRSS:\t 2048 kB\n"),
                              ("self", "7 (lean) S 1 42 42", "VmRSS:\t 1024 kB\n")):
        (proc / pid).mkdir(parents=True)
        if stat is not None:
            (proc / pid / "stat").write_text(stat)
            (proc / pid / "status").write_text(status)
    order = ["8", "9", "12", "self", "7", "11", "10"]

    class Proc:
        def __init__(self, path):
            assert path == "/proc"

        def iterdir(self):
            return [proc / n for n in order]
    monkeypatch.setattr(repl_module, "Path", Proc)
    assert repl_module._group_rss_mb(42) == 1.5 and repl_module._group_rss_mb(43) == 2.0


def test_repl_command_count_recycling():
    repl = LeanRepl(REPL, max_commands=2)
    try:
        repl.run_many([GOOD] * 5)
        assert repl.restarts == 2
    finally:
        repl.close()


# ------------------------------------------------------------------------------------ Kimina


@pytest.fixture()
def kimina():
    import kimina_server

    srv, url, log = kimina_server.start(api_key="sekret")
    yield url, log
    srv.shutdown()
    srv.server_close()


def test_kimina_batch_in_one_request(kimina):
    url, log = kimina
    client = KiminaClient(url, api_key="sekret", timeout=5)
    assert client.health()
    res = check_proofs(client, [(FORMAL, GOOD), (FORMAL, SORRY), (FORMAL, BAD)])
    assert [a.outcome for a in res] == ["accepted", "rejected", "rejected"]
    (path, req), = log
    assert path == "/api/check"
    assert set(req) == {"snippets", "timeout", "debug", "reuse"} and req["debug"] is False and req["reuse"] is True
    assert [s["id"] for s in req["snippets"]] == ["0", "1", "2"]
    assert all(set(s) == {"id", "code"} for s in req["snippets"])


def test_kimina_auth_and_timeouts_are_inconclusive(kimina):
    url, _ = kimina
    runs = KiminaClient(url, api_key="", timeout=5).run_many([GOOD])
    assert runs[0].status == "error" and "401" in runs[0].error
    import kimina_server

    hang = build_source(FORMAL, GOOD.replace("omega", "omega " + kimina_server.HANG_MARKER))[0]
    (run,) = KiminaClient(url, api_key="sekret", timeout=0.5).run_many([hang])
    assert run.status == "timeout" and judge_run(run, hang).outcome == "inconclusive"


def test_kimina_body_positions_are_shifted_to_whole_source_lines(kimina):
    """Older servers report lines after the import header; positions='body' adds the header's lines back, so
    the axiom report is matched to the checker's own command line."""
    from rewardkit.jury.lean.check import split_header

    url, _ = kimina
    src = build_source(FORMAL, BAD)[0]
    (whole,) = KiminaClient(url, api_key="sekret", timeout=5).run_many([src])
    (body,) = KiminaClient(url, api_key="sekret", timeout=5, positions="body").run_many([src])
    header = split_header(src)[0].count("\n")
    assert header > 0 and [m.line for m in body.messages] == [m.line + header for m in whole.messages]
    with pytest.raises(ValueError, match="positions='lines'"):
        KiminaClient(url, positions="lines")


@pytest.mark.parametrize(("reply", "why"), [
    (b"[]", "the reply has no 'results' list ('[]')"),
    (b'{"detail": "busy"}', "the reply has no 'results' list"),
    (b'{"results": "none"}', "the reply has no 'results' list"),
    (b'{"results": ["0"]}', "returned no result for snippet 0"),
    # two answers for one snippet: the last one used to win, whichever it was
    (b'{"results": [{"id": "0", "error": "unknown tactic"}, {"id": 0, "response": {"env": 0}}]}',
     "returned 2 results for snippet 0"),
    (b'{"results": [{"id": "0", "response": "env 0"}]}', "malformed result for snippet 0 (TypeError: 'response' is a str"),
    # neither an error nor a response used to be read as an empty answer: no axiom report, a cached rejection
    (b'{"results": [{"id": "0", "time": 0.2}]}', "malformed result for snippet 0 (ValueError: a result with neither"),
    (b'{"results": [{"id": "0", "error": null, "response": null}]}', "(ValueError: a result with neither 'error' nor"),
    (b'{"results": [{"id": "0", "time": "fast", "response": {"env": 0}}]}', "malformed result for snippet 0 (ValueError"),
    (b'{"results": [{"id": "0", "response": {"env": 0, "messages": ["error"]}}]}', "malformed result for snippet 0 (AttributeError"),
    (b'{"results": [{"id": "0", "response": {"env": 0, "messages": [{"severity": "error", "pos": {"line": "x"}}]}}]}',
     "malformed result for snippet 0 (ValueError"),
    # an error without its severity used to be read as a message of severity "", so the proof was accepted
    (b'{"results": [{"id": "0", "response": {"env": 0, "messages": [{"data": "unknown tactic"}]}}]}',
     "malformed result for snippet 0 (ValueError: a message whose severity is None, not one of information, "
     "warning, error)"),
])
def test_a_kimina_reply_of_the_wrong_shape_is_an_error_per_snippet_naming_the_server(reply, why):
    """Before, a reply that was JSON but not Kimina's shape raised out of ``run_many`` (TypeError, AttributeError),
    ending the whole batch's scoring instead of leaving each proof inconclusive."""
    import kimina_server

    srv, url, _ = kimina_server.start(reply=reply)
    try:
        (run,) = KiminaClient(url, timeout=5).run_many([GOOD])
    finally:
        srv.shutdown()
        srv.server_close()
    assert run.status == "error" and run.error.startswith(f"Kimina server {url}") and why in run.error, run.error
    assert judge_run(run, GOOD).outcome == "inconclusive"


@pytest.mark.parametrize("make, kw, says", [
    (lambda **kw: KiminaClient("http://127.0.0.1:9", **kw), {"batch_size": 0}, "KiminaClient: batch_size=0"),
    (lambda **kw: KiminaClient("http://127.0.0.1:9", **kw), {"batch_size": 2.5}, "KiminaClient: batch_size=2.5"),
    (lambda **kw: KiminaClient("http://127.0.0.1:9", **kw), {"timeout": 0}, "KiminaClient: timeout=0"),
    (lambda **kw: KiminaClient("http://127.0.0.1:9", **kw), {"timeout": float("nan")}, "KiminaClient: timeout=nan"),
    (lambda **kw: KiminaClient("http://127.0.0.1:9", **kw), {"http_timeout": -1}, "KiminaClient: http_timeout=-1"),
    (lambda **kw: LeanRepl(REPL, **kw), {"timeout": 0}, "LeanRepl: timeout=0"),
    (lambda **kw: LeanRepl(REPL, **kw), {"header_timeout": -5}, "LeanRepl: header_timeout=-5"),
    (lambda **kw: LeanRepl(REPL, **kw), {"max_rss_mb": 0}, "LeanRepl: max_rss_mb=0"),
    (lambda **kw: LeanRepl(REPL, **kw), {"max_commands": 0}, "LeanRepl: max_commands=0"),
    (lambda **kw: LeanRepl(REPL, **kw), {"max_commands": True}, "LeanRepl: max_commands=True"),
    (lambda **kw: LeanSubprocess(LEAN, probe=False, **kw), {"timeout": -1.0}, "LeanSubprocess: timeout=-1.0"),
    (lambda **kw: LeanSubprocess(LEAN, probe=False, **kw), {"memory_mb": 0}, "LeanSubprocess: memory_mb=0"),
    (lambda **kw: LeanSubprocess(LEAN, probe=False, **kw), {"workers": 0}, "LeanSubprocess: workers=0"),
    (lambda **kw: LeanSubprocess(LEAN, probe=False, **kw), {"max_heartbeats": -1}, "LeanSubprocess: max_heartbeats=-1"),
    (lambda **kw: LeanSubprocess(LEAN, probe=False, **kw), {"max_heartbeats": 1e5}, "LeanSubprocess: max_heartbeats=100000.0"),
])
def test_checker_settings_that_cannot_work_are_refused_at_construction(make, kw, says):
    """A zero deadline or limit is a mistake, not "unbounded": before, LeanSubprocess(memory_mb=0) ran Lean with
    no memory bound, and LeanRepl(timeout=0) timed out and restarted on every proof."""
    with pytest.raises(ValueError, match=f"^{re.escape(says)}: expected"):
        make(**kw)


def test_lean_reads_max_heartbeats_0_as_no_bound_so_it_is_passed_through():
    lean = LeanSubprocess(LEAN, max_heartbeats=0, probe=False)
    assert lean.command()[-2:] == ["-D", "maxHeartbeats=0"]


def test_probe_refuses_a_lean_that_cannot_check_an_empty_file():
    """Every proof would be inconclusive on such a Lean: say so when the checker is made."""
    with pytest.raises(LeanToolchainError, match=r"could not check an empty file \(timeout\): lean exceeded 0.5s"):
        LeanSubprocess(LEAN, timeout=0.5, env={"LEAN_STANDIN_SLEEP": "30"})
    with pytest.raises(LeanToolchainError, match=r"could not check an empty file \(error\): lean "):  # killed, or MemoryError
        LeanSubprocess(LEAN, memory_mb=300, env={"LEAN_STANDIN_ALLOC_MB": "2000"})


def _kimina_replying(reply: bytes, sources: list[str]) -> list:
    import kimina_server

    srv, url, _ = kimina_server.start(reply=reply)
    try:
        return KiminaClient(url, timeout=5).run_many(sources)
    finally:
        srv.shutdown()
        srv.server_close()


def test_kimina_reads_errors_times_and_missing_results_per_snippet():
    # a server error is a timeout only when it says it timed out; each run keeps the server's time
    reply = json.dumps({"results": [
        {"id": "0", "time": 0.25, "error": "Lean REPL command timed out."},
        {"id": "1", "time": 0.5, "error": "out of memory"},
        {"id": "2", "error": "unknown constant"},
        {"id": "3", "time": 0.75, "response": {"env": 0}},
        {"id": "5", "response": {"env": 0}},  # no result for snippet 4: the rest is still read
        {"id": "6", "response": {"message": "unknown environment"}}]}).encode()  # the REPL inside refused it
    runs = _kimina_replying(reply, [GOOD] * 7)
    assert [(r.status, r.seconds) for r in runs] == [("timeout", 0.25), ("error", 0.5), ("error", 0.0),
                                                      ("ok", 0.75), ("error", 0.0), ("ok", 0.0), ("error", 0.0)]
    assert runs[6].error == "Kimina REPL: unknown environment"
    assert [r.error for r in runs[:3]] == ["Kimina: Lean REPL command timed out.", "Kimina: out of memory",
                                           "Kimina: unknown constant"]
    assert runs[4].error.endswith(" returned no result for snippet 4") and runs[3].error is None


def test_kimina_messages_quote_at_most_200_characters_of_the_reply():
    long = "x" * 300
    (run,) = _kimina_replying(json.dumps({"detail": long}).encode(), [GOOD])
    assert run.error.endswith(f"the reply has no 'results' list ({json.dumps({'detail': long})[:200]!r})")
    bad = {"id": "0", "response": "r" * 300}
    (run,) = _kimina_replying(json.dumps({"results": [bad]}).encode(), [GOOD])
    assert run.error.endswith(f": {str(bad)[:200]!r}")


def test_kimina_settings_url_key_batches_and_http_timeout(kimina, monkeypatch):
    url, log = kimina
    monkeypatch.setenv("KIMINA_URL", url + "/")
    monkeypatch.setenv("KIMINA_API_KEY", "sekret")
    client = KiminaClient()  # both from the environment; a trailing slash does not double the path's
    assert client.url == url and client.api_key == "sekret"
    assert client.client.timeout.read == 2 * 300.0 + 30
    assert KiminaClient(timeout=5).client.timeout.read == 40 and KiminaClient(http_timeout=7).client.timeout.read == 7
    assert KiminaClient(api_key="").api_key == ""  # an explicit empty key wins over the environment
    runs = client.run_many([GOOD] * 65)  # the default batch: 64 snippets a request
    assert all(r.status == "ok" for r in runs)
    assert [(path, len(req["snippets"]), req["timeout"]) for path, req in log] == [("/api/check", 64, 300.0),
                                                                                   ("/api/check", 1, 300.0)]
    one = KiminaClient(batch_size=1).run_many([GOOD] * 2)  # one snippet a request is a batch size too
    assert [r.status for r in one] == ["ok", "ok"] and len(log) == 4


def test_kimina_unreachable_is_an_error():
    client = KiminaClient("http://127.0.0.1:9/pathX/", timeout=1)
    assert client.url == "http://127.0.0.1:9/pathX" and client.health() is False  # only the slash is stripped
    (run,) = client.run_many([GOOD])
    assert run.status == "error" and "127.0.0.1:9" in run.error


def test_make_checker_specs(kimina):
    url, _ = kimina
    assert isinstance(make_checker(url, api_key="sekret"), KiminaClient)
    r = make_checker("repl:" + " ".join(REPL))
    assert isinstance(r, LeanRepl) and r.cmd == REPL
    assert isinstance(make_checker(LEAN), LeanSubprocess)


# ------------------------------------------------------------------------------------- cache


def _writer(path: str, start: int, n: int) -> None:
    c = VerificationCache(path)
    for i in range(start, start + n):
        c.put(cache_key("p", str(i), {"k": 1}), "verified", f"r{i}", {"i": i})


def test_cache_is_safe_with_several_processes(tmp_path):
    path = str(tmp_path / "verify.sqlite")
    VerificationCache(path)
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(path, k * 200, 200)) for k in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    c = VerificationCache(path)
    assert len(c) == 600
    e = c.get(cache_key("p", "417", {"k": 1}))
    assert (e.outcome, e.reason, e.detail) == ("verified", "r417", {"i": 417})
    assert c.get(cache_key("p", "417", {"k": 2})) is None  # settings are part of the key
    assert (c.hits, c.misses, c.hit_rate) == (1, 1, 0.5)
