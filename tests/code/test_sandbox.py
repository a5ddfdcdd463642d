"""The sandbox with real processes: limits, clean environment, namespaces, cleanup, and the fallback."""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import math
import os
import pickle
import re
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import types
import uuid
import warnings
from pathlib import Path

import pytest

from rewardkit.code import sandbox as sbx
from rewardkit.code.sandbox import (
    SYSTEM_VISIBLE,
    Limits,
    SandboxUnavailable,
    _count_tasks,
    _kill_group,
    default_hidden,
    namespaces_available,
    python_paths,
    remove_cgroup,
    run_sandboxed,
)
from rewardkit.code.sandbox_stage import mount_points

PY = python_paths()
needs_ns = pytest.mark.skipif(not namespaces_available(), reason="namespaces not permitted on this machine")


def py(code: str, **kw):
    return run_sandboxed([sys.executable, "-I", "-c", textwrap.dedent(code)], readonly_paths=PY, **kw)


@contextlib.contextmanager
def listening(timeout: float):
    """A socket listening on 127.0.0.1 (accept times out after ``timeout``) and its port."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(timeout)
    try:
        yield srv, srv.getsockname()[1]
    finally:
        srv.close()


def procs_with(marker: str) -> list[int]:
    """Live processes whose command line contains ``marker`` (zombies count as gone)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{name}/cmdline").read_bytes()
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmd and state != "Z":
            out.append(int(name))
    return out


def test_runs_any_argv_with_stdin_files_and_exit_status():
    r = run_sandboxed(["/bin/sh", "-c", "cat data.txt; tr a-z A-Z; exit 7"], stdin=b"shout\n",
                      files={"data.txt": b"from a file\n"})
    assert r.error is None, r.error
    assert (r.returncode, r.signal) == (7, None)
    assert r.stdout == b"from a file\nSHOUT\n"
    assert not r.ok


def test_environment_is_clean(monkeypatch):
    monkeypatch.setenv("RK_PLANTED_SECRET", "hunter2")
    r = run_sandboxed(["/usr/bin/env"], env={"ONLY_THIS": "1"})
    assert r.ok, r
    lines = sorted(r.stdout.decode().splitlines())
    assert lines == ["ONLY_THIS=1", "PATH=/usr/local/bin:/usr/bin:/bin"]
    r = py("import os; print(open('/proc/1/environ','rb').read() + open('/proc/self/environ','rb').read())")
    assert b"hunter2" not in r.stdout + r.stderr


def test_fresh_working_directory_is_removed_after():
    a = run_sandboxed(["/bin/sh", "-c", "pwd; ls -A; touch left-behind"])
    b = run_sandboxed(["/bin/sh", "-c", "pwd; ls -A"])
    assert a.ok and b.ok
    wa, wb = a.stdout.decode().splitlines()[0], b.stdout.decode().splitlines()[0]
    assert wa != wb and b.stdout.decode().splitlines()[1:] == []
    assert not os.path.exists(wa) and not os.path.exists(wb)


def test_wall_clock_deadline_kills_the_run():
    r = run_sandboxed(["/bin/sh", "-c", "echo started; sleep 30; echo finished"], limits=Limits(wall_seconds=1))
    assert r.timed_out and not r.ok and r.returncode is None
    assert r.stdout.decode().split() == ["started"]  # killed during the sleep, before it could finish


def test_cpu_limit():
    r = py("while True: pass", limits=Limits(cpu_seconds=1, wall_seconds=30))
    assert r.cpu_exceeded and not r.timed_out and r.signal in (signal.SIGXCPU, signal.SIGKILL)


def test_memory_limit():
    r = py("x = bytearray(2 << 30)", limits=Limits(memory_bytes=512 << 20))
    assert r.returncode == 1 and b"MemoryError" in r.stderr


def test_file_size_limit():
    r = py("open('big', 'wb').write(b'x' * (2 << 20))", limits=Limits(file_bytes=1 << 20))
    assert not r.ok and (r.signal == signal.SIGXFSZ or b"File too large" in r.stderr)


def test_output_flood_is_capped_and_killed():
    r = py("import sys\nwhile True: sys.stdout.write('x' * 65536)", limits=Limits(output_bytes=100_000))
    assert r.output_truncated and not r.ok
    assert len(r.stdout) + len(r.stderr) == 100_000


def test_fork_bomb_is_contained_and_leaves_nothing():
    marker = f"forkbomb-{uuid.uuid4().hex}"
    r = py(f"""
        import os  # {marker}
        while True:
            try:
                os.fork()
            except OSError:
                pass
    """, limits=Limits(wall_seconds=3, processes=32))
    assert not r.ok and r.timed_out
    assert procs_with(marker) == []


def test_daemons_do_not_outlive_the_run():
    marker = f"daemon-{uuid.uuid4().hex}"
    r = py(f"""
        import os, time  # {marker}
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(60)
            os._exit(0)
        print('parent done')
    """)
    assert r.ok and r.stdout == b"parent done\n"
    time.sleep(0.2)
    assert procs_with(marker) == []


@needs_ns
def test_no_network_even_to_a_listening_local_socket():
    with listening(0.5) as (srv, port):
        r = py(f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2); print('connected')")
        assert r.returncode == 1 and b"connected" not in r.stdout
        with pytest.raises(socket.timeout):
            srv.accept()
        assert run_sandboxed(["/bin/true"], network=True).ok  # the switch exists and runs


@needs_ns
def test_home_and_tmp_are_hidden(tmp_path):
    home = Path(os.environ.get("HOME", "/root"))
    planted = home / f".rk-planted-{uuid.uuid4().hex}"
    planted.write_text("secret in home")
    (tmp_path / "secret.txt").write_text("secret in tmp")
    try:
        r = py(f"""
            for p in [{str(planted)!r}, {str(tmp_path / 'secret.txt')!r}]:
                try:
                    print(open(p).read())
                except OSError as e:
                    print(type(e).__name__)
        """)
        assert r.ok, r
        assert b"secret" not in r.stdout
    finally:
        planted.unlink()


@needs_ns
def test_filesystem_outside_the_workdir_is_read_only():
    target = Path(tempfile.mkdtemp(prefix="rk-open-to-all-"))  # world-writable, reachable: only the mount stops it
    target.chmod(0o777)
    try:
        r = py(f"open({str(target / 'x')!r}, 'w').write('escaped'); print('wrote')", hidden_paths=())
        assert b"wrote" not in r.stdout and b"Read-only file system" in r.stderr
        assert list(target.iterdir()) == []
    finally:
        shutil.rmtree(target)
    r = py("import os; os.chdir('..'); open('escaped', 'w'); print('wrote')")
    assert b"wrote" not in r.stdout


@needs_ns
def test_pid_namespace_hides_and_protects_the_host():
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        r = py(f"""
            import os, signal
            print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))
            for pid in (1, os.getppid(), {os.getpid()}, {sleeper.pid}, -1):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError as e:
                    print(pid, type(e).__name__)
        """)
        first = r.stdout.decode().splitlines()[0]
        assert first == "[1, 2]", r.stdout  # init of the namespace and the program itself
        assert sleeper.poll() is None  # the host's processes are out of reach
    finally:
        sleeper.kill()
        sleeper.wait()


@needs_ns
def test_runs_as_an_unprivileged_uid_when_root():
    if os.geteuid() != 0:
        pytest.skip("uid drop applies when the caller is root")
    r = py("import os; print(os.getuid(), os.getgid(), os.getgroups())")
    uid, gid, groups = r.stdout.decode().split(maxsplit=2)
    assert int(uid) >= 1_000_000_000 and uid == gid and groups.strip() == "[]"


def test_no_isolation_still_cleans_up_daemons():
    marker = f"{uuid.uuid4().int % 1000}.{uuid.uuid4().int % 1000}"
    r = run_sandboxed(["/bin/sh", "-c", f"setsid sleep 7{marker} & sleep 8{marker} & echo started"],
                      isolation="none")
    assert r.isolation_used == "none" and r.stdout == b"started\n"
    time.sleep(0.2)
    assert procs_with(f"sleep 7{marker}") == [] and procs_with(f"sleep 8{marker}") == []


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs root and util-linux")
def test_fallback_when_the_kernel_refuses_namespaces():
    # inside a user namespace without an id mapping, creating namespaces fails with EPERM: a real refusal
    code = textwrap.dedent("""
        import warnings
        from rewardkit.code.sandbox import run_sandboxed, SandboxUnavailable
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r = run_sandboxed(["/bin/sh", "-c", "echo hi"])
        print(r.isolation_used, r.stdout, any("WITHOUT" in str(x.message) for x in w))
        try:
            run_sandboxed(["/bin/true"], isolation="namespaces")
        except SandboxUnavailable as e:
            print("refused:", e)
    """)
    repo = str(Path(__file__).resolve().parents[2])
    p = subprocess.run(["unshare", "--user", sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=repo, env={**os.environ, "PYTHONPATH": repo}, timeout=120)
    lines = p.stdout.splitlines()
    assert lines[0] == "none b'hi\\n' True", p.stdout + p.stderr
    assert lines[1].startswith("refused: namespaces refused by the kernel: unshare: EPERM")


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="empty argv"):
        run_sandboxed([])
    with pytest.raises(ValueError, match="outside the working directory"):
        run_sandboxed(["/bin/true"], files={"../x": b""})
    with pytest.raises(ValueError, match="Limits.wall_seconds"):
        Limits(wall_seconds=0)
    with pytest.raises(ValueError, match="isolation"):
        run_sandboxed(["/bin/true"], isolation="vm")  # type: ignore[arg-type]
    r = run_sandboxed(["/no/such/program"])
    assert r.error is not None and "no/such/program" in r.error


def _caps(text: str) -> dict[str, int]:
    return {k: int(v, 16) for k, v in (line.split(":\t") for line in text.splitlines() if line.startswith("Cap"))}


def test_program_has_no_capabilities_and_cannot_gain_any():
    r = run_sandboxed(["/bin/sh", "-c", "grep -E '^(Cap|NoNewPrivs)' /proc/self/status"])
    assert r.ok, r
    caps = _caps(r.stdout.decode())
    assert caps["CapEff"] == caps["CapPrm"] == 0
    assert b"NoNewPrivs:\t1" in r.stdout


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to become nobody")
def test_unprivileged_caller_gets_user_namespaces_without_capabilities():
    # a caller that is not root: the sandbox makes its own user namespace, where the program would be
    # uid 0 with every capability; it must end up with none (no ptrace of the harness, no mounts)
    loader = ("import importlib.util, sys\n"
              f"spec = importlib.util.spec_from_file_location('sbx', {str(Path(__file__).resolve().parents[2] / 'rewardkit' / 'code' / 'sandbox.py')!r})\n"
              "m = importlib.util.module_from_spec(spec); sys.modules['sbx'] = m; spec.loader.exec_module(m)\n"
              "r = m.run_sandboxed(['/bin/sh', '-c', 'id -u; grep -E ^Cap /proc/self/status; ls /proc | grep -c [0-9]'])\n"
              "print(r.isolation_used, r.error); print(r.stdout.decode())\n")
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", py, "-I", "-c", loader],
                       capture_output=True, text=True, cwd="/", timeout=60)
    lines = p.stdout.splitlines()
    if lines and lines[0].startswith("none"):
        pytest.skip("unprivileged user namespaces are disabled here")
    assert lines[0] == "namespaces None", p.stdout + p.stderr
    assert lines[1] == "0"  # root of its own namespace ...
    caps = _caps("\n".join(lines[2:7]))
    assert caps["CapEff"] == caps["CapPrm"] == caps["CapBnd"] == 0  # ... with nothing to use


def test_a_callers_working_directory_is_used_and_handed_back(tmp_path):
    work = tmp_path / "project"
    work.mkdir()
    (work / "input.txt").write_text("41")
    r = run_sandboxed(["/bin/sh", "-c", "echo $(( $(cat input.txt) + 1 )) > answer.txt; mkdir sub; touch sub/x"],
                      workdir=work)
    assert r.ok, r
    assert (work / "answer.txt").read_text() == "42\n"  # the caller's directory is kept, with what was written
    me = (os.getuid(), os.getgid())
    assert {(p.lstat().st_uid, p.lstat().st_gid) for p in [work, *work.rglob("*")]} == {me}


# ------------------------------------------------------------------ the whole program is bounded, not each process

_probe = run_sandboxed(["/bin/true"])
needs_cgroup = pytest.mark.skipif(not _probe.memory_bound.startswith("cgroup"),
                                  reason=f"no memory cgroup can be made here ({_probe.notes}): memory is bounded "
                                         "per process only, as the README states")

SIX_HOGS = """
    import os, sys, time
    pids = []
    for _ in range(6):
        pid = os.fork()
        if pid == 0:
            hog = b"x" * (100 << 20)  # 100 MiB really written: well under the per-process limit
            time.sleep(1.0)  # all six alive at once
            os._exit(0)
        pids.append(pid)
    failed = [p for p in pids if os.waitpid(p, 0)[1] != 0]
    print(len(failed), "of 6 killed")
    sys.exit(1 if failed else 0)
"""


@needs_cgroup
def test_memory_is_bounded_for_the_whole_process_tree():
    # before: 6 x 100 MiB passed (each process under RLIMIT_AS); 600 MiB reached the host
    r = py(SIX_HOGS, limits=Limits(memory_bytes=512 << 20, program_memory_bytes=256 << 20, wall_seconds=30))
    assert r.memory_exceeded and not r.ok and r.error is None, (r, r.stderr[-500:])
    assert r.memory_bound.startswith("cgroup") and 0 < r.peak_memory_bytes <= 256 << 20
    ok = py(SIX_HOGS, limits=Limits(memory_bytes=512 << 20, program_memory_bytes=1 << 30, wall_seconds=30))
    assert ok.ok and not ok.memory_exceeded and ok.stdout == b"0 of 6 killed\n", ok


BALLOON = """
    import os, time
    for _ in range(4):  # 4 x 100 MiB under a 256 MiB cap, each process under its own limit
        if os.fork() == 0:
            hog = b"x" * (100 << 20)
            time.sleep(60)  # the survivors wait: the run ends at its deadline, not by itself
            os._exit(0)
    for _ in range(4):
        os.wait()
"""


@needs_cgroup
def test_a_memory_balloon_that_ends_at_the_deadline_says_it_hit_the_memory_cap():
    # before: only timed_out; nothing said the tree had reached its memory cap (grade() answered "time limit")
    r = py(BALLOON, limits=Limits(memory_bytes=512 << 20, program_memory_bytes=256 << 20, wall_seconds=4))
    assert r.timed_out and r.memory_at_cap and r.error is None, (r, r.stderr[-300:])
    quiet = py("import time; time.sleep(60)", limits=Limits(program_memory_bytes=256 << 20, wall_seconds=1))
    assert quiet.timed_out and not quiet.memory_at_cap and not quiet.memory_exceeded


def _user_namespaces_here() -> str | None:
    """Why this kernel makes no user namespaces (None: it does, so a sandboxed program could try)."""
    if shutil.which("unshare") is None:
        return "no unshare(1) on this machine"
    r = subprocess.run(["unshare", "-Ur", "true"], capture_output=True, text=True)
    return None if r.returncode == 0 else f"the kernel refuses user namespaces here: {r.stderr.strip()[:200]}"


_NO_USERNS = _user_namespaces_here()

NEW_USERNS = """
    import ctypes, os, subprocess, threading
    libc = ctypes.CDLL(None, use_errno=True)
    print("unshare", libc.unshare(0x10000000), ctypes.get_errno())  # CLONE_NEWUSER: EPERM
    t = threading.Thread(target=print, args=("thread ok",)); t.start(); t.join()  # clone3 -> ENOSYS -> clone
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    print("fork", os.waitpid(pid, 0)[1] >> 8)
    print(subprocess.run(["/bin/echo", "spawn ok"], capture_output=True, text=True).stdout.strip())
"""


@needs_ns
@pytest.mark.skipif(_NO_USERNS is not None, reason=_NO_USERNS or "")
def test_a_program_cannot_make_a_user_namespace_and_mount_past_the_disk_limit():
    # before: `unshare -Urm` gave the program a mount namespace of its own: a private tmpfs over /tmp took
    # 640 MiB against disk_bytes=64 MiB
    script = ("unshare -Urm /bin/sh -c 'mount -t tmpfs none /tmp && for i in 1 2 3 4; do "
              "head -c 4000000 /dev/zero > /tmp/f$i || exit 3; done && echo wrote 16 MB'; echo rc=$?")
    r = run_sandboxed(["/bin/sh", "-c", script], limits=Limits(disk_bytes=8 << 20))
    assert b"wrote" not in r.stdout and b"rc=1" in r.stdout, (r.stdout, r.stderr)
    assert b"Operation not permitted" in r.stderr and r.user_namespaces == "refused"
    r = py(NEW_USERNS)
    assert r.ok, r.stderr[-500:]
    assert r.stdout.decode().split("\n") == ["unshare -1 1", "thread ok", "fork 7", "spawn ok", ""]


@needs_cgroup
def test_the_runs_cgroup_is_removed_after_it():
    r = py("print(open('/proc/self/cgroup').read())")
    path = next(line.split(":", 2)[2] for line in r.stdout.decode().splitlines() if "rewardkit-sandbox-" in line)
    name = path.rstrip("/").rsplit("/", 1)[1]
    leftovers = [root for root, dirs, _ in os.walk("/sys/fs/cgroup") if name in dirs]
    assert leftovers == []


@needs_ns
def test_files_are_bounded_in_total_not_only_each():
    # before: 5 files of 6 MiB each (each under the 16 MiB per-file limit) all reached the host disk
    r = py("""
        import sys
        written = 0
        try:
            for i in range(5):
                with open(f"f{i}", "wb") as f:
                    f.write(b"x" * (6 << 20))
                written += 6
        except OSError as e:
            print(written, "MiB, then", e.strerror)
            sys.exit(1)
        print(written, "MiB")
    """, limits=Limits(file_bytes=16 << 20, disk_bytes=16 << 20))
    assert r.disk_bound == "tmpfs" and not r.ok, r
    assert r.stdout.decode().startswith(("6 MiB, then No space left", "12 MiB, then No space left")), r.stdout


@needs_ns
def test_prepared_files_are_on_the_bounded_working_directory():
    r = run_sandboxed(["/bin/sh", "-c", "cat sub/data.txt; df -k . | tail -1"], files={"sub/data.txt": b"here\n"},
                      limits=Limits(disk_bytes=8 << 20))
    assert r.ok, r
    lines = r.stdout.decode().splitlines()
    assert lines[0] == "here" and lines[1].startswith("tmpfs") and int(lines[1].split()[1]) == 8 << 10


# -------------------------------- isolation chosen, namespaces probed, the working directory, the paths shown


def test_python_paths_let_a_python_program_run_behind_the_default_hidden_folders():
    paths = python_paths()
    assert paths == sorted(set(paths)) and all(os.path.isabs(p) and os.path.isdir(p) for p in paths), paths
    for needed in (os.path.realpath(sys.executable), os.path.realpath(os.__file__)):  # the interpreter, its stdlib
        assert any(needed.startswith(p + os.sep) for p in paths), (needed, paths)
    r = run_sandboxed([sys.executable, "-I", "-c", "import json; print(json.dumps([1, 2]))"], readonly_paths=paths)
    assert r.ok and r.stdout == b"[1, 2]\n", r


@pytest.mark.skipif(os.geteuid() != 0, reason="plants a file and a link in /")
def test_default_hidden_is_every_real_top_level_folder_but_the_systems(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # an empty current folder: a listing of it instead of / finds nothing
    tag = uuid.uuid4().hex
    plain, link = Path(f"/rk-plain-file-{tag}"), Path(f"/rk-link-to-tmp-{tag}")
    plain.write_text("not a folder")
    link.symlink_to("/tmp")  # a link is not hidden itself (a mount there would land on its target)
    try:
        hidden = default_hidden()
    finally:
        plain.unlink()
        link.unlink()
    assert "/tmp" in hidden and "/dev/shm" in hidden
    assert str(plain) not in hidden and str(link) not in hidden
    assert not set(hidden) & set(SYSTEM_VISIBLE)
    assert all(os.path.isdir(d) for d in hidden)


def test_prepared_files_may_lie_several_folders_deep():
    r = run_sandboxed(["/bin/cat", "a/b/c/deep.txt"], files={"a/b/c/deep.txt": b"three folders down\n"})
    assert r.ok and r.stdout == b"three folders down\n", r


def test_the_fresh_working_directory_is_a_sandbox_folder_in_the_temp_folder():
    r = run_sandboxed(["/bin/pwd"])
    assert r.ok, r
    wd = r.stdout.decode().strip()
    assert os.path.dirname(wd) == os.path.realpath(tempfile.gettempdir()), wd
    assert os.path.basename(wd).startswith("rk-sandbox-"), wd


@needs_ns
def test_network_true_reaches_a_listening_local_socket():
    with listening(10) as (srv, port):
        r = py(f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('connected')",
               network=True)
        assert r.ok and r.stdout == b"connected\n", (r, r.stderr[-300:])
        srv.accept()[0].close()


@needs_ns
def test_namespaces_demanded_are_used_even_after_auto_found_none(monkeypatch):
    # $$ is the program's pid: 2 in its own PID namespace (1 is the namespace's init), a host pid otherwise
    monkeypatch.setitem(sbx._ns_state, "refused", "unshare: EPERM (planted by the test)")
    pid = ["/bin/sh", "-c", "echo $$"]
    demanded = run_sandboxed(pid, isolation="namespaces")
    assert demanded.ok and demanded.isolation_used == "namespaces" and demanded.stdout == b"2\n", demanded
    auto = run_sandboxed(pid)  # auto remembers the refusal: no namespaces
    assert auto.ok and auto.isolation_used == "none" and int(auto.stdout) > 2, auto
    none = run_sandboxed(pid, isolation="none")
    assert none.ok and none.isolation_used == "none" and int(none.stdout) > 2, none
    assert sbx._ns_state == {"refused": "unshare: EPERM (planted by the test)"}


@needs_ns
def test_only_an_auto_run_records_that_namespaces_work(monkeypatch):
    monkeypatch.setattr(sbx, "_ns_state", {})
    assert run_sandboxed(["/bin/true"], isolation="namespaces").isolation_used == "namespaces"
    assert run_sandboxed(["/bin/true"], isolation="none").isolation_used == "none"
    assert sbx._ns_state == {}  # an explicit choice is the caller's; auto has found nothing yet
    r = run_sandboxed(["/bin/true"])
    assert r.ok and r.isolation_used == "namespaces"
    assert sbx._ns_state == {"refused": None}


def test_namespaces_available_probes_once_with_a_short_trivial_run(monkeypatch):
    calls = []
    real = sbx.run_sandboxed

    def spy(argv, **kw):
        r = real(argv, **kw)
        calls.append((kw, r))
        return r

    monkeypatch.setattr(sbx, "run_sandboxed", spy)
    monkeypatch.setattr(sbx, "_ns_state", {"refused": "unshare: EPERM (planted by the test)"})
    assert namespaces_available() is False and calls == []  # a refusal is remembered: no probe
    monkeypatch.setattr(sbx, "_ns_state", {"refused": None})
    assert namespaces_available() is True and calls == []  # so is a success
    monkeypatch.setattr(sbx, "_ns_state", {})
    found = namespaces_available()
    assert len(calls) == 1
    kw, probe = calls[0]
    assert probe.ok and probe.error is None, probe  # the probe really ran a program
    assert kw.get("limits", Limits()).wall_seconds <= 10  # and cannot keep the caller waiting long
    assert found is (probe.isolation_used == "namespaces")
    assert namespaces_available() is found and len(calls) == 1  # answered from what the probe found


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to start as a uid")
def test_count_tasks_counts_every_process_and_thread_of_one_uid(monkeypatch):
    uid = 2_100_000_000 + secrets.randbelow(100_000_000)  # no account, and outside the sandbox's per-run uids
    assert _count_tasks(uid) == 0
    # as that uid: a shell with two sleeping children, and a python with two threads besides its main one
    sh = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "/bin/sh", "-c",
                           "sleep 60 & sleep 60 & echo ready; wait"], stdout=subprocess.PIPE,
                          start_new_session=True, cwd="/")
    code = ("import threading, time\n"
            "for _ in range(2): threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
            "print('ready', flush=True); time.sleep(60)\n")
    pyp = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "/usr/bin/python3",
                            "-I", "-S", "-c", code], stdout=subprocess.PIPE, start_new_session=True, cwd="/")
    try:
        assert sh.stdout.readline() == b"ready\n" and pyp.stdout.readline() == b"ready\n"
        assert _count_tasks(uid) == 3 + 3
        listdir = os.listdir
        with monkeypatch.context() as m:  # a process that ends between the listing of /proc and its stat
            m.setattr(os, "listdir", lambda p=".": (["4194305"] if p == "/proc" else []) + listdir(p))
            assert _count_tasks(uid) == 6  # past the kernel's largest pid_max (2**22): a pid that is gone
    finally:
        for p in (sh, pyp):
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    end = time.monotonic() + 10  # the orphaned sleeps are reaped by init, a moment later
    while _count_tasks(uid) and time.monotonic() < end:
        time.sleep(0.05)
    assert _count_tasks(uid) == 0


def _in_child(prepare, work):
    """``work()`` in a forked child, after ``prepare()`` changed what the kernel lets that child do; its return
    value, or ("raised", its exception), comes back pickled."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(rfd)
            prepare()
            out = ("ok", work())
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            out = ("raised", f"{type(e).__name__}: {e}")
        try:
            with os.fdopen(wfd, "wb") as f:
                pickle.dump(out, f)
        finally:
            os._exit(0)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return pickle.loads(data)


_UNSHARE_NR = {"x86_64": 272, "aarch64": 97}


class _Insn(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Insn))]


def _refuse_unshare() -> None:
    """A seccomp filter on this process and all it starts: unshare(2) fails with EPERM, as in a container whose
    seccomp profile refuses namespaces to root."""
    libc = ctypes.CDLL(None, use_errno=True)
    insns = [(0x20, 0, 0, 0), (0x15, 0, 1, _UNSHARE_NR[os.uname().machine]),  # ld nr; jeq unshare
             (0x06, 0, 0, 0x00050000 | 1), (0x06, 0, 0, 0x7FFF0000)]  # EPERM; allow
    arr = (_Insn * len(insns))(*[_Insn(*i) for i in insns])
    prog = _Prog(len(insns), arr)
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:  # no_new_privs; filter
        raise OSError(ctypes.get_errno(), "seccomp")


def _fresh_auto_state() -> None:
    sbx._ns_state.clear()  # the child's own copy: nothing found yet
    sbx._warn_no_namespaces.cache_clear()


FALLBACK_SCRIPT = 'cat in/data.txt; cat; echo "$WHO"; ulimit -n; id -u'


@pytest.mark.skipif(os.geteuid() != 0 or os.uname().machine not in _UNSHARE_NR, reason="root on x86_64/aarch64")
def test_a_root_caller_refused_namespaces_falls_back_with_everything_else_kept():
    def run():
        return run_sandboxed(["/bin/sh", "-c", FALLBACK_SCRIPT], stdin=b"from stdin\n", env={"WHO": "me"},
                             files={"in/data.txt": b"from a file\n"}, limits=Limits(open_files=77))

    def work():
        _fresh_auto_state()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            r = run()
        try:
            run_sandboxed(["/bin/true"], isolation="namespaces")
            demanded = "ran"
        except SandboxUnavailable as e:
            demanded = str(e)
        return {"isolation": r.isolation_used, "error": r.error, "uid": r.uid, "out": r.stdout.decode().split("\n"),
                "warned": [str(x.message) for x in w if issubclass(x.category, RuntimeWarning)],
                "available": namespaces_available(), "demanded": demanded}

    got = _in_child(_refuse_unshare, work)
    assert got[0] == "ok", got
    got = got[1]
    assert got["isolation"] == "none" and got["error"] is None, got
    out = got["out"]
    assert out[:4] == ["from a file", "from stdin", "me", "77"], got  # files, stdin, env and limits all reached it
    assert got["uid"] is not None and int(out[4]) == got["uid"] >= 1_000_000_000, got  # still not root
    assert len(got["warned"]) == 1 and "WITHOUT" in got["warned"][0] and "unshare: EPERM" in got["warned"][0], got
    assert got["available"] is False  # the refusal is remembered
    assert got["demanded"].startswith("namespaces refused by the kernel: unshare: EPERM"), got
    here = run()  # the same run where namespaces work (or fell back here too): the same answers
    assert here.error is None and here.stdout.decode().split("\n")[:4] == out[:4], here


def _leave_root() -> None:
    """A user namespace with no id mapping: this process is no longer root (euid reads 65534, no capabilities
    on the host's files) and the kernel refuses it any further namespaces."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUSER)")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make the child's user namespace")
def test_a_caller_that_is_not_root_runs_as_itself_and_its_temp_folder_goes_even_when_locked():
    # the program takes every permission off folders of its own: a caller that is not root cannot list them
    # (and leaves a link to a folder of the caller's, whose permissions must stay as they are)
    outside = Path(tempfile.mkdtemp(prefix="rk-outside-"))
    outside.chmod(0o750)
    script = (f"pwd; mkdir -p locked/inner && echo x > locked/inner/f && ln -s {outside} locked/link && "
              "chmod 0 locked/inner locked . && echo done")

    def work():
        _fresh_auto_state()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = run_sandboxed(["/bin/sh", "-c", script])
        return os.geteuid(), r.isolation_used, r.error, r.uid, r.stdout.decode().split()

    got = _in_child(_leave_root, work)
    assert got[0] == "ok", got
    euid, isolation, error, uid, out = got[1]
    try:
        assert euid != 0 and isolation == "none" and error is None and out[1:] == ["done"], got
        assert uid is None  # no uid of its own: only root can hand one out
        assert not os.path.exists(out[0]), f"the run's temp folder {out[0]} was left behind"
        assert outside.stat().st_mode & 0o777 == 0o750  # never chmod'ed through the link
    finally:
        outside.rmdir()
        if out and out[0].startswith(tempfile.gettempdir()) and os.path.exists(out[0]):
            subprocess.run(["chmod", "-R", "u+rwx", out[0]])
            shutil.rmtree(out[0])
    assert run_sandboxed(["/bin/true"]).ok  # where the caller is root


# ---------------------------------------------------- what the stage is given, cgroup removal, kills, rlimits


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the per-run uid (and dropping to nobody) needs root")


def _limits_of(text: str) -> dict[str, tuple[str, str]]:
    """/proc/self/limits as {name: (soft, hard)}."""
    out = {}
    for line in text.splitlines()[1:]:
        m = re.match(r"(Max [a-z ]+?)\s{2,}(\S+)\s+(\S+)", line)
        if m:
            out[m.group(1)] = (m.group(2), m.group(3))
    return out


@needs_ns
@needs_root
def test_the_program_sees_exactly_the_limits_it_was_given_and_its_own_uid():
    # 0.5 CPU seconds round up to a 1 s soft limit (SIGXCPU) and a 2 s hard one (SIGKILL); a root caller's run has a
    # uid of its own, so RLIMIT_NPROC is the given number, with nobody else's processes added
    limits = Limits(cpu_seconds=0.5, memory_bytes=300 << 20, file_bytes=3 << 20, processes=17, open_files=33)
    r = run_sandboxed(["/bin/sh", "-c", "cat /proc/self/limits; id -u"], limits=limits)
    assert r.ok, r
    *table, uid = r.stdout.decode().splitlines()
    lim = _limits_of("\n".join(table))
    assert lim["Max cpu time"] == ("1", "2")
    assert lim["Max address space"] == (str(300 << 20),) * 2
    assert lim["Max file size"] == (str(3 << 20),) * 2
    assert lim["Max processes"] == ("17", "17")
    assert lim["Max open files"] == ("33", "33")
    assert lim["Max core file size"] == ("0", "0")
    assert r.uid == int(uid) >= 1_000_000_000  # the result names the uid the program really ran as
    assert r.isolation_used == "namespaces"


@needs_ns
def test_hidden_folders_are_exactly_the_ones_asked_for_and_by_default_all_but_the_systems():
    base = Path(tempfile.mkdtemp(prefix="rk-hidden-", dir="/tmp"))  # readable by anyone: only hiding stops a read
    try:
        (base / "inner").mkdir()
        (base / "seen.txt").write_text("visible\n")
        (base / "inner" / "secret.txt").write_text("secret\n")
        for p in (base, base / "inner", base / "seen.txt", base / "inner" / "secret.txt"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        show = ["/bin/sh", "-c", f"cat {base}/seen.txt; ls -A {base}/inner"]
        by_default = run_sandboxed(show)  # /tmp is not a system folder: hidden
        assert by_default.error is None and by_default.stdout == b"", by_default
        asked = run_sandboxed(show, hidden_paths=[base / "inner"])  # only this one: /tmp stays visible
        assert asked.ok and asked.stdout == b"visible\n", asked
    finally:
        shutil.rmtree(base)


def test_nothing_of_the_callers_environment_reaches_the_stage(monkeypatch):
    # the stage starts with an empty environment: a caller's LD_PRELOAD is not loaded into it (here a missing
    # library, which the loader would complain about on the run's stderr), and a caller without HOME is fine
    monkeypatch.setenv("LD_PRELOAD", "/nonexistent/rk-preload.so")
    monkeypatch.delenv("HOME", raising=False)
    r = run_sandboxed(["/bin/sh", "-c", "echo \"[$LD_PRELOAD][$HOME]\""])
    assert r.ok and r.error is None, r
    assert (r.stdout, r.stderr) == (b"[][]\n", b"")


def test_the_run_has_a_session_of_its_own_and_its_time_and_signal_are_reported():
    # without namespaces the program is the stage's child and sees real ids: its process group and session are
    # the stage's (its parent's), not the caller's; it sleeps 0.3 s and then kills itself
    t0 = time.perf_counter()
    r = run_sandboxed(["/bin/sh", "-c", "cut -d' ' -f4-6 /proc/$$/stat; sleep 0.3; kill -9 $$"], isolation="none")
    took = time.perf_counter() - t0
    assert r.isolation_used == "none" and r.error is None, r
    ppid, pgrp, session = map(int, r.stdout.split())
    assert ppid == pgrp == session != os.getsid(0)
    assert (r.returncode, r.signal) == (None, signal.SIGKILL)
    assert not r.cpu_exceeded and not r.timed_out and not r.ok  # a kill with no CPU spent is not the CPU limit
    assert 0.3 <= r.seconds <= took


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("isolation", ["auto", "none"])
def test_a_stage_that_cannot_start_is_a_sandbox_error_not_a_result(monkeypatch, isolation):
    used = "none" if isolation == "none" or not namespaces_available() else "namespaces"
    monkeypatch.setattr(sys, "executable", "/nonexistent/rk-python")  # the stage's interpreter is gone
    before = _open_fds()
    r = run_sandboxed(["/bin/true"], stdin=b"input", isolation=isolation)
    assert r.error is not None and r.error.startswith("cannot start the sandbox stage: ")
    assert "/nonexistent/rk-python" in r.error
    assert (r.returncode, r.signal, r.stdout, r.stderr) == (None, None, b"", b"")
    assert (r.timed_out, r.cpu_exceeded, r.output_truncated, r.seconds) == (False, False, False, 0.0)  # nothing ran
    assert r.isolation_used == used
    assert not r.ok
    assert _open_fds() == before  # the status pipe and the stdin file are closed


def _stage_of(marker: str) -> int | None:
    """The sandbox stage this process started whose configuration (on its command line) holds ``marker``."""
    for pid in procs_with(marker):
        try:
            if int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) == os.getpid():
                return pid
        except (OSError, ValueError):
            continue
    return None


def test_a_stage_killed_from_outside_is_a_sandbox_error_naming_its_end():
    marker = f"rk-stage-{uuid.uuid4().hex}"
    box: dict = {}
    run = threading.Thread(target=lambda: box.update(r=run_sandboxed(["/bin/sh", "-c", f"sleep 30 # {marker}"],
                                                                     limits=Limits(wall_seconds=20))))
    run.start()
    try:
        end = time.monotonic() + 10
        while (stage := _stage_of(marker)) is None and time.monotonic() < end:
            time.sleep(0.01)
        assert stage is not None, "the stage never showed up"
        os.kill(stage, signal.SIGKILL)
    finally:
        run.join(timeout=30)
    r = box["r"]
    assert r.error is not None and "exit status -9" in r.error, r
    assert r.returncode is None and not r.timed_out and not r.ok
    assert procs_with(marker) == []  # the program went with its stage


def test_a_crashed_stage_never_runs_the_programs_input():
    # a deadline the stage's interval timer cannot hold makes the stage fail before the program starts; whatever
    # it does then, the program's stdin is data for the program, never code run by the (privileged) stage
    r = run_sandboxed(["/bin/true"], stdin=b"import sys; sys.stdout.write('STDIN-RAN')\n",
                      limits=Limits(wall_seconds=1e12))
    assert b"STDIN-RAN" not in r.stdout + r.stderr
    assert r.ok or r.error is not None


SYSTEM_PYTHON = "/usr/bin/python3"
needs_nobody = pytest.mark.skipif(os.geteuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK),
                                  reason="needs root to become nobody, and a system Python nobody can run")


def _as_nobody(argv: list[str], **kw) -> dict:
    """run_sandboxed(argv, **kw) called by a caller that is not root: a fork of this process that became user
    nobody (its stage runs under the system Python: this interpreter may lie in a folder nobody cannot enter).
    Returns the result's fields (bytes decoded), or {"exception": ...}."""
    scratch = tempfile.mkdtemp(prefix="rk-nobody-")  # nobody's temporary folder, wherever ours lies
    os.chmod(scratch, 0o1777)
    stage = shutil.copy(sbx._STAGE, scratch)  # a copy of the stage that nobody can read
    os.chmod(stage, 0o644)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        out = {}
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE, as for any process started as nobody
            os.chdir("/usr")  # a working directory of the caller's that is not "/"
            sys.executable, sbx._STAGE, tempfile.tempdir = SYSTEM_PYTHON, stage, scratch
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = run_sandboxed(argv, **kw)
            out = {k: (v.decode(errors="replace") if isinstance(v, bytes) else v) for k, v in vars(r).items()}
        except BaseException as e:  # noqa: BLE001
            out = {"exception": repr(e)}
        finally:
            os.write(write_end, json.dumps(out).encode())
            os._exit(0)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 65536):
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(pid, 0)
    shutil.rmtree(scratch)
    return json.loads(b"".join(chunks) or b"{}")


@needs_nobody
def test_a_caller_that_is_not_root_gets_a_user_namespace_and_room_for_its_own_processes():
    if _NO_USERNS is not None:
        pytest.skip(_NO_USERNS)
    r = _as_nobody(["/bin/sh", "-c", "cat /proc/self/uid_map; grep -E '^Max processes' /proc/self/limits"],
                   limits=Limits(processes=40))
    assert r.get("error") is None and r.get("isolation_used") == "namespaces", r
    uid_map, nproc = r["stdout"].splitlines()
    assert uid_map.split() == ["0", "65534", "1"]  # root of its own user namespace, nobody outside it
    soft, hard = nproc.split()[2:4]
    # RLIMIT_NPROC counts every process of the caller's uid (here at least the caller itself): the program may
    # still start 40 of its own
    assert int(soft) == int(hard) > 40, nproc


@needs_nobody
def test_the_stage_of_a_caller_that_is_not_root_holds_nothing_of_the_callers():
    # without namespaces a program of the caller's own uid can look at its parent, the stage: it holds no
    # environment and sits in "/", not in the caller's working directory
    r = _as_nobody(["/bin/sh", "-c", "readlink /proc/$PPID/cwd; wc -c < /proc/$PPID/environ"], isolation="none")
    assert r.get("error") is None and r.get("isolation_used") == "none", r
    assert r["stdout"].split() == ["/", "0"]


def _exits_within(pidfd: int, seconds: float) -> bool:
    return bool(select.select([pidfd], [], [], seconds)[0])


def test_kill_group_terminates_the_stage_alone_and_kills_its_whole_group():
    # SIGTERM goes to the stage only (it ends the program's namespace / tree itself and says why); SIGKILL, the
    # last resort, goes to the stage's whole process group, whatever the stage could still do
    stage = subprocess.Popen(["/bin/sh", "-c", "sleep 30 & echo $!; wait"], stdout=subprocess.PIPE,
                             start_new_session=True)
    member = int(stage.stdout.readline())
    pidfd = os.pidfd_open(member)
    try:
        _kill_group(stage, signal.SIGTERM)
        assert stage.wait(timeout=10) == -signal.SIGTERM
        assert not _exits_within(pidfd, 0.3)  # the rest of the group was not signalled
        _kill_group(stage, signal.SIGKILL)  # the leader is gone; its group is not
        assert _exits_within(pidfd, 10)
        _kill_group(stage, signal.SIGKILL)  # nothing left: no error
    finally:
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)  # by its pidfd: never a reused pid
        except ProcessLookupError:
            pass
        os.close(pidfd)
        stage.stdout.close()


@pytest.fixture
def cgroup_parent():
    """A real cgroup of our own (memory v1 or cgroup v2, where root may make one) to make test cgroups in; a
    parent of our own, so that a sandbox run's sweep of empty ``rewardkit-sandbox-*`` cgroups cannot take ours."""
    own = dict(line.rstrip("\n").split(":", 2)[1:] for line in open("/proc/self/cgroup") if line.count(":") >= 2)
    key = next((k for k in own if "memory" in k.split(",")), None)
    bases = [m + own[key] for m in mount_points("cgroup", "memory")] if key else []
    bases += [m + own[""] for m in mount_points("cgroup2")] if "" in own else []
    for base in bases:
        parent = Path(base) / f"rk-test-{uuid.uuid4().hex[:12]}"
        try:
            parent.mkdir()
        except OSError:
            continue
        try:
            yield parent
        finally:
            for d in sorted((p for p in parent.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                d.rmdir()
            parent.rmdir()
        return
    pytest.skip(f"no cgroup can be made here (tried {bases}): remove_cgroup is tested on real cgroups only")


def test_remove_cgroup_kills_what_is_left_in_it_and_removes_it(cgroup_parent):
    cg = cgroup_parent / "rewardkit-sandbox-straggler"
    cg.mkdir()
    straggler = subprocess.Popen(["sleep", "30"])
    try:
        (cg / "cgroup.procs").write_text(str(straggler.pid))
        assert (cg / "cgroup.procs").read_text().split() == [str(straggler.pid)]
        t0 = time.monotonic()
        remove_cgroup(str(cg))
        took = time.monotonic() - t0
        assert not cg.exists()
        assert straggler.wait(timeout=5) == -signal.SIGKILL
        assert took < 1.0  # retried as soon as the straggler was gone, not after a long pause
    finally:
        straggler.kill()
        straggler.wait()
    remove_cgroup(str(cg))  # already gone: nothing to do


def test_a_stages_sweep_keeps_a_live_stages_empty_cgroup_and_removes_a_dead_ones(cgroup_parent):
    """Before: the sweep removed every empty ``rewardkit-sandbox-*`` cgroup, also one a concurrent stage had just
    made and not yet moved into, which then ran with per-process limits only."""
    from rewardkit.code.sandbox_stage import _sweep

    gone = subprocess.Popen(["/bin/true"])
    gone.wait()
    live, dead, odd = (cgroup_parent / f"rewardkit-sandbox-{n}" for n in (os.getpid(), gone.pid, "x"))
    for cg in (live, dead, odd):
        cg.mkdir()
    try:
        _sweep(str(cgroup_parent))
        assert live.is_dir() and not dead.exists() and not odd.exists()
    finally:
        for cg in (live, dead, odd):
            if cg.exists():
                cg.rmdir()


def test_remove_cgroup_gives_up_on_one_it_cannot_remove_and_says_so(cgroup_parent, monkeypatch, caplog):
    cg = cgroup_parent / "rewardkit-sandbox-stuck"
    (cg / "child").mkdir(parents=True)  # a cgroup with a child cgroup cannot be removed (EBUSY)
    now = [100.0]  # a clock of our own: 5 s of patience pass in no time, in exact steps

    def sleep(seconds):
        now[0] += 0.25

    monkeypatch.setattr(sbx, "time", types.SimpleNamespace(monotonic=lambda: now[0], sleep=sleep))
    with caplog.at_level(logging.WARNING, logger="rewardkit.code.sandbox"):
        remove_cgroup(str(cg))
    assert 105.0 < now[0] <= 105.25  # kept trying for the default 5 s, until they had passed, then stopped
    assert cg.exists() and str(cg) in caplog.text and "could not be removed" in caplog.text


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_limits_refuse_a_bound_that_is_not_a_finite_number(bad):
    # before: NaN and infinity passed the "> 0" check (NaN <= 0 is False) and failed later, elsewhere: a NaN
    # deadline made every run a stage crash, a NaN or infinite CPU, memory or output bound an unrelated error
    for name in ("cpu_seconds", "wall_seconds", "memory_bytes", "file_bytes", "processes", "open_files",
                 "output_bytes", "program_memory_bytes", "disk_bytes"):
        with pytest.raises(ValueError, match=f"Limits.{name} must be a finite number > 0"):
            Limits(**{name: bad})


# ------------------------------------------------------------------- the stage's report and the output reader


# Records shaped exactly as sandbox_stage.py writes them (one JSON object per line on the status fd):
#   S, memory cgroup:   {"memory_bound": "cgroup v2", "cgroup": "/sys/fs/cgroup/.../rewardkit-sandbox-x"}
#   S, none possible:   {"memory_bound": "rlimit", "cgroup": None, "notes": ["no memory cgroup (why): ..."]}
#   C, mounts:          {"notes": [...]} and {"disk_bound": "tmpfs"}
#   T, before exec:     {"user_namespaces": "refused"} or {"notes": [why]}; on failure
#                       {"stage_error": "exec 'x': ...", "exec_failed": True}
#   C or S (_describe): {"cpu_seconds": u + s, "max_rss_bytes": n, "returncode": rc, "signal": None}
#                       or {..., "returncode": None, "signal": sig}
#   S, on a deadline:   {"timed_out": True, "killed": "deadline"} / {"timed_out": False, "killed": "terminated"}
#   S, cgroup:          {"memory_exceeded": b, "memory_at_cap": b, "peak_memory_bytes": n}
#   S, failures:        {"stage_error": "unshare: ..."}, {"stage_error": "sandbox init died by signal 9"}
CG = "/sys/fs/cgroup/memory/rewardkit-sandbox-test"


def describe(rc=None, sig=None, cpu=0.25, rss=8 << 20) -> dict:
    return {"cpu_seconds": cpu, "max_rss_bytes": rss, "returncode": rc, "signal": sig}


def result(status, out=b"", err=b"", truncated=False, seconds=0.5, use_ns=True, limits=None, stage_rc=0):
    return sbx._result([dict(r) for r in status], out, err, truncated, seconds, use_ns, limits or Limits(),
                       stage_rc)


def test_result_of_a_full_report_takes_every_field_and_keeps_every_note():
    status = [{"memory_bound": "cgroup v1", "cgroup": CG}, {"notes": ["/opt: cannot hide (EPERM)"]},
              {"disk_bound": "tmpfs"}, {"notes": ["seccomp: no filter for this machine"]},
              describe(rc=3, cpu=0.75, rss=12 << 20),
              {"memory_exceeded": False, "memory_at_cap": True, "peak_memory_bytes": 300 << 20}]
    r = result(status, out=b"o", err=b"e", seconds=1.25, use_ns=True)
    assert (r.returncode, r.signal, r.error) == (3, None, None)
    assert (r.stdout, r.stderr, r.seconds) == (b"o", b"e", 1.25)
    assert r.cpu_seconds == 0.75 and r.max_rss_bytes == 12 << 20
    assert r.notes == ["/opt: cannot hide (EPERM)", "seccomp: no filter for this machine"]  # both, in order
    assert (r.memory_bound, r.disk_bound, r.isolation_used) == ("cgroup v1", "tmpfs", "namespaces")
    assert (r.memory_at_cap, r.memory_exceeded, r.peak_memory_bytes) == (True, False, 300 << 20)
    assert r.user_namespaces == "allowed"  # T said nothing about it
    assert r.output_truncated is False and r.timed_out is False and r.cpu_exceeded is False and not r.ok


def test_result_defaults_when_the_stage_reports_only_the_exit():
    r = result([describe(rc=0, cpu=0.0, rss=0)], use_ns=False)
    assert r.ok and r.error is None and r.notes == []
    assert (r.memory_bound, r.disk_bound, r.user_namespaces) == ("rlimit", "file", "allowed")
    assert (r.peak_memory_bytes, r.max_rss_bytes, r.cpu_seconds) == (0, 0, 0.0)
    assert r.isolation_used == "none"
    r = result([{"user_namespaces": "refused"}, describe(rc=0)], use_ns=True)
    assert r.user_namespaces == "refused" and r.isolation_used == "namespaces"


def test_result_of_an_exec_failure_is_an_error_with_zero_usage():
    r = result([{"memory_bound": "rlimit", "cgroup": None, "notes": ["no memory cgroup (not root): per process"]},
                {"stage_error": "exec '/no/such': [Errno 2] No such file or directory", "exec_failed": True}])
    assert r.error == "exec '/no/such': [Errno 2] No such file or directory"
    assert r.notes == ["no memory cgroup (not root): per process"]
    assert (r.returncode, r.cpu_seconds, r.max_rss_bytes, r.peak_memory_bytes) == (None, 0.0, 0, 0)
    assert not r.ok


def test_result_without_an_exit_report_is_an_error_naming_the_stage_status_and_its_last_stderr():
    err = b"a" * 100 + b"b" * 500
    r = result([{"memory_bound": "rlimit", "cgroup": None, "notes": ["n"]}], err=err, stage_rc=-9)
    assert r.error.startswith("the sandbox stage ended without a report (exit status -9): ")
    assert r.error.endswith(repr(b"b" * 500)) and "a" not in r.error.split(": ", 1)[1]  # the last 500 bytes only
    assert not r.ok and r.returncode is None
    # killed on purpose (deadline or flood) before any exit report: not a sandbox failure
    assert result([{"timed_out": True, "killed": "deadline"}]).error is None
    assert result([{"timed_out": False, "killed": "terminated"}]).timed_out is False
    r = result([], truncated=True)
    assert r.error is None and r.output_truncated is True and not r.ok


def test_result_cpu_exceeded_by_sigxcpu_or_by_sigkill_at_the_cpu_limit_only():
    one = Limits(cpu_seconds=1)
    assert result([describe(sig=signal.SIGXCPU, cpu=0.3)], limits=one).cpu_exceeded
    assert result([describe(sig=signal.SIGKILL, cpu=2.0)], limits=one).cpu_exceeded  # the hard limit (soft + 1)
    assert result([describe(sig=signal.SIGKILL, cpu=0.95)], limits=one).cpu_exceeded  # 50 ms of slack
    assert result([describe(sig=signal.SIGKILL, cpu=1.0)], limits=one).cpu_exceeded
    assert not result([describe(sig=signal.SIGKILL, cpu=0.5)], limits=one).cpu_exceeded  # killed for another reason
    assert not result([describe(sig=signal.SIGKILL, cpu=0.9)], limits=one).cpu_exceeded
    assert not result([describe(rc=1, cpu=5.0)], limits=one).cpu_exceeded  # used it all, exited by itself
    assert not result([describe(sig=signal.SIGTERM, cpu=5.0)], limits=one).cpu_exceeded
    # the kernel counts whole seconds: 1.5 s of limit is 2 s of CPU
    half = Limits(cpu_seconds=1.5)
    assert not result([describe(sig=signal.SIGKILL, cpu=1.6)], limits=half).cpu_exceeded
    assert result([describe(sig=signal.SIGKILL, cpu=1.95)], limits=half).cpu_exceeded


def test_result_timed_out_and_memory_flags_come_from_the_stage():
    r = result([{"timed_out": True, "killed": "deadline"}, describe(sig=signal.SIGKILL, cpu=0.01)], use_ns=False)
    assert r.timed_out and not r.cpu_exceeded and r.signal == signal.SIGKILL and not r.ok
    r = result([describe(sig=signal.SIGKILL, cpu=0.2),
                {"memory_exceeded": True, "memory_at_cap": True, "peak_memory_bytes": 64 << 20}])
    assert r.memory_exceeded and r.memory_at_cap and r.peak_memory_bytes == 64 << 20 and not r.ok
    assert not r.cpu_exceeded
    r = result([describe(sig=signal.SIGKILL), {"stage_error": "sandbox init died by signal 9"}])
    assert r.error == "sandbox init died by signal 9"


def test_end_to_end_exit_status_and_signal():
    r = run_sandboxed(["/bin/sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (r.returncode, r.signal, r.error, r.timed_out, r.cpu_exceeded) == (3, None, None, False, False), r
    assert (r.stdout, r.stderr, r.output_truncated) == (b"out\n", b"err\n", False), r
    assert r.max_rss_bytes > 0 and r.cpu_seconds >= 0 and r.seconds > 0, r
    r = run_sandboxed(["/bin/sh", "-c", "kill -SEGV $$"])
    assert (r.returncode, r.signal, r.error, r.cpu_exceeded) == (None, signal.SIGSEGV, None, False), r


def test_end_to_end_cpu_exceeded_reports_the_cpu_used():
    r = py("while True: pass", limits=Limits(cpu_seconds=1, wall_seconds=30))
    assert r.cpu_exceeded and not r.timed_out and r.error is None, (r.error, r.signal, r.cpu_seconds)
    assert r.cpu_seconds > 0.5, r.cpu_seconds  # the stage's rusage of the program (the kernel's tick sampling differs)


def test_end_to_end_exactly_the_cap_is_no_flood_and_both_streams_count_together():
    r = run_sandboxed(["/bin/sh", "-c", "head -c 100000 /dev/zero"], limits=Limits(output_bytes=100_000))
    assert r.ok and r.output_truncated is False and r.stdout == bytes(100_000), (r.error, len(r.stdout), r)
    r = run_sandboxed(["/bin/sh", "-c", "head -c 60000 /dev/zero >&2; sleep 0.3; head -c 60000 /dev/zero"],
                      limits=Limits(output_bytes=100_000))
    assert r.output_truncated and not r.ok and r.error is None, (r.error, r.returncode, r.signal, r.notes)
    assert len(r.stdout) + len(r.stderr) == 100_000, (len(r.stdout), len(r.stderr))


# _collect with a real process in its own session and a real status pipe; a fake clock makes the
# deadlines a count of loop turns (each real turn waits at most 50 ms for output)

def spawn(script: str, status: bytes = b""):
    rfd, wfd = os.pipe()
    proc = subprocess.Popen(["/bin/sh", "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    os.write(wfd, status)
    os.close(wfd)
    return proc, rfd


def end_group(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # whatever the test's process left
    except ProcessLookupError:
        pass
    proc.wait()


class StepClock:
    def __init__(self, start: float, step: float):
        self.now, self.step = start - step, step

    def monotonic(self) -> float:
        self.now += self.step
        return self.now


@pytest.fixture
def kills(monkeypatch):
    """Every _kill_group call as (clock reading, signal); the kill itself still happens."""
    calls, real = [], sbx._kill_group
    clock = StepClock(100.0, 0.5)
    monkeypatch.setattr(sbx, "time", types.SimpleNamespace(monotonic=clock.monotonic))

    def record(proc, sig):
        calls.append((clock.now, sig))
        real(proc, sig)

    monkeypatch.setattr(sbx, "_kill_group", record)
    return calls


def test_collect_kills_the_group_at_the_backstop_wall_plus_5s(kills):
    proc, rfd = spawn("sleep 5 & wait")  # a child in the group too; no output, never exits in time
    try:
        out, err, status, truncated = sbx._collect(proc, rfd, Limits(wall_seconds=1.0))
    finally:
        end_group(proc)
    # the clock read 100.0 for the backstop (106.0); turns read 100.5, 101.0, ...: 106.0 is not past it
    assert kills[0] == (106.5, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    assert (out, err, status, truncated) == (b"", b"", [], False)


def test_collect_a_flood_gets_sigterm_then_sigkill_2s_later(kills):
    # sh ignores SIGTERM (so do its children): only the SIGKILL to the whole group ends it
    proc, rfd = spawn("trap '' TERM; head -c 300000 /dev/zero; sleep 5")
    try:
        out, err, status, truncated = sbx._collect(proc, rfd, Limits(wall_seconds=30, output_bytes=100_000))
    finally:
        end_group(proc)
    assert truncated is True and out == bytes(100_000) and err == b""
    (t_term, sig_term), (t_kill, sig_kill) = kills[0], kills[1]
    assert sig_term == signal.SIGTERM and sig_kill == signal.SIGKILL
    assert t_kill - t_term == 2.5  # the first turn more than 2 s after the SIGTERM
    assert proc.returncode == -signal.SIGKILL


def test_collect_reads_a_straggler_for_1s_after_the_stage_exits_then_stops():
    # sh exits at once; its background child keeps the pipes open and writes at ~0.1 s and ~1.7 s
    proc, rfd = spawn("echo early; (sleep 0.1; echo a; sleep 1.6; echo b) & exit 0", b'{"returncode": 0}\n')
    try:
        out, err, status, truncated = sbx._collect(proc, rfd, Limits(wall_seconds=60))
    finally:
        end_group(proc)
    assert out == b"early\na\n" and err == b""
    assert status == [{"returncode": 0}] and truncated is False and proc.returncode == 0


def test_collect_waits_for_a_stage_that_closed_its_pipes():
    waits = []

    class Recording(subprocess.Popen):
        def wait(self, timeout=None):
            waits.append(timeout)
            return super().wait(timeout)

    rfd, wfd = os.pipe()
    os.close(wfd)
    proc = Recording(["/bin/sh", "-c", "exec >&- 2>&-; sleep 0.3; exit 4"], stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, start_new_session=True)
    assert sbx._collect(proc, rfd, Limits(wall_seconds=1.0)) == (b"", b"", [], False)
    assert proc.returncode == 4  # waited for, not abandoned
    assert waits and all(w is not None and 1.0 < w < math.inf for w in waits)  # a bounded wait past the deadline


def test_collect_an_unreadable_status_line_becomes_a_stage_error():
    cut = '{"returncode": 0, "sig'  # a write cut short
    long = "x" * 300
    proc, rfd = spawn("true", b'{"disk_bound": "tmpfs"}\n' + cut.encode() + b"\n\xff\xfe{\n" + long.encode() + b"\n")
    _, _, status, _ = sbx._collect(proc, rfd, Limits(wall_seconds=5))
    assert status == [{"disk_bound": "tmpfs"},
                      {"stage_error": f"unreadable status line {cut!r}"},
                      {"stage_error": "unreadable status line '\ufffd\ufffd{'"},
                      {"stage_error": f"unreadable status line {'x' * 200!r}"}]
    assert json.loads(json.dumps(status)) == status


def test_a_stage_terminated_from_outside_is_a_sandbox_error_not_the_programs_result():
    # no flood of ours sent that SIGTERM: the program's result is unknown (before: no error, so a grader read
    # returncode None / signal 9 as the program's own failure)
    for status in ([{"timed_out": False, "killed": "terminated"}],  # namespaces: C is gone, nothing described
                   [{"timed_out": False, "killed": "terminated"}, describe(sig=signal.SIGKILL)]):  # no namespaces
        r = result(status)
        assert r.error == "the sandbox stage was terminated from outside (SIGTERM) before the program finished"
        assert not r.ok
    assert result([{"timed_out": False, "killed": "terminated"}], truncated=True).error is None  # ours, on a flood
    marker = uuid.uuid4().hex
    found: list[int] = []

    def terminate_stage():
        deadline = time.monotonic() + 20
        while not found and time.monotonic() < deadline:
            stage, program = None, False
            for pid in procs_with(marker):
                try:
                    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if int(stat[1]) == os.getpid() and b"sandbox_stage.py" in cmd:  # S, the parent's own child
                    stage = pid
                program = program or cmd.startswith(b"/bin/sh")  # the program runs: S has its handlers
            if stage and program:
                os.kill(stage, signal.SIGTERM)
                found.append(stage)
            time.sleep(0.02)

    t = threading.Thread(target=terminate_stage)
    t.start()
    r = run_sandboxed(["/bin/sh", "-c", f"echo started; sleep 30; : {marker}"], limits=Limits(wall_seconds=25))
    t.join()
    assert found and r.error and "terminated" in r.error, r
    assert not r.timed_out and not r.ok


def test_a_working_directory_that_cannot_be_removed_is_a_warning_not_a_failed_run(monkeypatch, caplog):
    """The run's result stands when its temp folder cannot go (say, a file the kernel will not unlink): the
    folder is named in a warning, and the run is not turned into an exception after it finished."""
    import logging

    real_rmtree, made = shutil.rmtree, []

    def stuck(path, ignore_errors=False, **kw):  # a tree nothing can remove
        made.append(str(path))
        if not ignore_errors:
            raise PermissionError(1, "Operation not permitted", str(path))

    monkeypatch.setattr(sbx.shutil, "rmtree", stuck)
    caplog.set_level(logging.WARNING, logger="rewardkit.code.sandbox")
    try:
        r = run_sandboxed(["/bin/sh", "-c", "echo kept > f; echo ok"])
    finally:
        monkeypatch.undo()
        for path in set(made):
            real_rmtree(path, ignore_errors=True)
    assert r.ok and r.stdout == b"ok\n", r
    assert made and all(p == made[0] for p in made)
    assert [rec.getMessage() for rec in caplog.records] == [
        f"sandbox working directory {made[0]} could not be removed"]
