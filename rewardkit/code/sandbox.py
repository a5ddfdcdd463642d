"""Run an untrusted program (any argv) under limits, in a fresh directory, with nothing inherited.

Every run: its own session and process group, a fresh temporary working directory (deleted after), a clean
environment (only what the caller passes plus a minimal PATH), RLIMIT_CPU/AS/FSIZE/NPROC/NOFILE/CORE, a
wall-clock deadline that kills everything the program started, and a cap on captured output (read as it
comes; the run is killed on a flood). The whole program's memory (every process it starts, together) is
capped by a memory cgroup where one can be made (root, or a delegated cgroup v2 subtree): ``memory_bound``
says which bound held. With namespaces (the default where the kernel allows them) the program also runs as
pid 2 of its own PID namespace, with no network, a read-only file system except its working directory (a
tmpfs of ``Limits.disk_bytes``: all its files together), every top-level folder but the system's (``SYSTEM_VISIBLE``)
and the caller's home hidden behind empty read-only tmpfs (the interpreter's folders shown again, read-only), and (when the caller is root) an unprivileged uid of its own. Every run
gets a seccomp filter that refuses new user namespaces (so no private mounts past ``disk_bytes``). See the
README's "Sandbox" section for what this does not promise.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)

Isolation = Literal["auto", "namespaces", "none"]
MINIMAL_PATH = "/usr/local/bin:/usr/bin:/bin"
#: top-level folders a program may see (read-only): the system's programs and libraries, /etc, /proc, /dev, /sys;
#: every other top-level folder (/opt, /srv, /work, checkouts, /var, /tmp, ...) is hidden, and the interpreter's
#: own folders are shown again by ``readonly_paths`` (an allow-list: a folder nobody listed is never readable)
SYSTEM_VISIBLE = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/dev", "/sys")
ALSO_HIDDEN = ("/dev/shm",)  # inside a visible folder, and shared between processes


def default_hidden() -> tuple[str, ...]:
    """Every top-level folder outside ``SYSTEM_VISIBLE``, plus ``ALSO_HIDDEN``."""
    top = sorted(f"/{n}" for n in os.listdir("/") if os.path.isdir(f"/{n}") and not os.path.islink(f"/{n}"))
    return tuple(d for d in top if d not in SYSTEM_VISIBLE) + ALSO_HIDDEN
_STAGE = str(Path(__file__).with_name("sandbox_stage.py"))
_UID_BASE, _UID_SPAN = 1_000_000_000, 1_000_000_000  # per-run uids: outside any real account range


class SandboxUnavailable(RuntimeError):
    """Namespaces were demanded (``isolation="namespaces"``) but the kernel refused them."""


@dataclass(frozen=True)
class Limits:
    """Per-run resource limits; each is enforced by the kernel (rlimits) or by the wall-clock watchdog."""

    cpu_seconds: float = 10.0
    wall_seconds: float = 20.0
    memory_bytes: int = 1 << 30  # RLIMIT_AS: address space, per process
    file_bytes: int = 16 << 20  # RLIMIT_FSIZE: largest file the program may write
    processes: int = 64  # RLIMIT_NPROC: processes + threads of the run's own uid
    open_files: int = 256  # RLIMIT_NOFILE
    output_bytes: int = 4 << 20  # stdout + stderr captured; more kills the run
    program_memory_bytes: int = 2 << 30  # memory cgroup: every process of the run together (where one can be made)
    disk_bytes: int = 64 << 20  # tmpfs under the working directory: all files together (with namespaces)

    def __post_init__(self) -> None:
        for name in ("cpu_seconds", "wall_seconds", "memory_bytes", "file_bytes", "processes", "open_files",
                     "output_bytes", "program_memory_bytes", "disk_bytes"):
            if not 0 < getattr(self, name) < math.inf:  # NaN and infinity bound nothing: refused here, not at a run
                raise ValueError(f"Limits.{name} must be a finite number > 0, got {getattr(self, name)!r}")

    def rlimits(self) -> dict[str, list[int]]:
        """(soft, hard) per rlimit; CPU gets SIGXCPU at the soft limit and SIGKILL one second later."""
        cpu = max(1, math.ceil(self.cpu_seconds))
        same = lambda v: [int(v), int(v)]  # noqa: E731 - the program cannot raise what it cannot exceed
        return {"RLIMIT_CPU": [cpu, cpu + 1], "RLIMIT_AS": same(self.memory_bytes),
                "RLIMIT_FSIZE": same(self.file_bytes), "RLIMIT_NPROC": same(self.processes),
                "RLIMIT_NOFILE": same(self.open_files), "RLIMIT_CORE": [0, 0]}


@dataclass
class SandboxResult:
    """What a run did. ``error`` is set when the sandbox itself failed (the program's result is unknown)."""

    returncode: int | None  # exit status; None when killed by a signal
    signal: int | None  # the signal that killed the program, if any
    stdout: bytes
    stderr: bytes
    timed_out: bool  # the wall-clock deadline killed it
    cpu_exceeded: bool  # RLIMIT_CPU killed it (SIGXCPU / SIGKILL at the hard limit)
    output_truncated: bool  # it wrote more than Limits.output_bytes and was killed
    seconds: float  # wall seconds, as the parent saw them
    isolation_used: Literal["namespaces", "none"]
    cpu_seconds: float = 0.0
    max_rss_bytes: int = 0
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    uid: int | None = None  # the run's own uid (when the caller is root), to audit that nothing of it is left

    memory_bound: str = "rlimit"  # "cgroup v2" / "cgroup v1": the whole tree; "rlimit": per process only
    disk_bound: str = "file"  # "tmpfs": all files together (disk_bytes); "file": per file only (RLIMIT_FSIZE)
    memory_exceeded: bool = False  # the cgroup's OOM killer ended a process of the run
    memory_at_cap: bool = False  # the whole tree's memory reached the cgroup's cap (the kernel reclaimed or refused)
    user_namespaces: str = "allowed"  # "refused": a seccomp filter stops the program making user namespaces
    peak_memory_bytes: int = 0  # the whole tree's peak (cgroup), else 0

    @property
    def ok(self) -> bool:
        """Exited by itself with status 0, within every limit, and the sandbox worked."""
        return (self.error is None and self.returncode == 0 and not self.timed_out and not self.cpu_exceeded
                and not self.output_truncated and not self.memory_exceeded)


@functools.lru_cache(maxsize=1)
def _warn_no_namespaces(reason: str) -> None:
    msg = (f"rewardkit.code.sandbox: Linux namespaces are not available here ({reason}); running WITHOUT "
           "filesystem, network and PID isolation (rlimits, clean env, temp dir and process cleanup only). "
           "Pass isolation='namespaces' to refuse instead, or isolation='none' to silence this warning.")
    warnings.warn(msg, RuntimeWarning, stacklevel=3)
    log.warning(msg)


_ns_state: dict[str, str | None] = {}  # "refused" -> reason, once the kernel said no
_lock = threading.Lock()


def namespaces_available() -> bool:
    """Whether runs get namespaces here (probes once with a trivial run)."""
    if "refused" not in _ns_state:
        run_sandboxed(["/bin/true"], isolation="auto", limits=Limits(wall_seconds=10))
    return _ns_state.get("refused") is None


def python_paths() -> list[str]:
    """Directories a Python program needs to see (the interpreter's prefixes), for ``readonly_paths``."""
    paths = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, sys.exec_prefix)}
    paths.add(os.path.realpath(os.path.dirname(sys.executable)))
    return sorted(paths)


def run_sandboxed(
    argv: Sequence[str],
    *,
    stdin: bytes | None = None,
    limits: Limits = Limits(),
    workdir: str | Path | None = None,
    files: Mapping[str, bytes] | None = None,
    env: Mapping[str, str] | None = None,
    readonly_paths: Sequence[str | Path] = (),
    hidden_paths: Sequence[str | Path] | None = None,
    network: bool = False,
    isolation: Isolation = "auto",
) -> SandboxResult:
    """Run ``argv`` sandboxed; ``files`` are written into the working directory first.

    ``workdir``: a directory to run in (kept; default a fresh temporary one, deleted after). ``readonly_paths``
    re-expose, read-only, paths that lie under a hidden directory (e.g. an interpreter under /root).
    ``hidden_paths``: folders behind empty tmpfs (default ``default_hidden()``: all but the system's).
    ``isolation``: "auto" uses namespaces where permitted and otherwise falls back with a loud warning;
    "namespaces" raises SandboxUnavailable instead; "none" never uses them.
    """
    if not argv:
        raise ValueError("run_sandboxed: empty argv")
    if isolation not in ("auto", "namespaces", "none"):
        raise ValueError(f"isolation must be 'auto', 'namespaces' or 'none', got {isolation!r}")
    use_ns = isolation == "namespaces" or (isolation == "auto" and _ns_state.get("refused") is None)
    own_dir = workdir is None
    wd = Path(tempfile.mkdtemp(prefix="rk-sandbox-")) if own_dir else Path(workdir).resolve()
    owner = (wd.stat().st_uid, wd.stat().st_gid)
    uid = _UID_BASE + secrets.randbelow(_UID_SPAN) if os.geteuid() == 0 else None
    try:
        _prepare_dir(wd, files or {}, uid)
        res = _run(argv, stdin, limits, wd, env or {}, readonly_paths, hidden_paths, network, use_ns, uid, own_dir)
        if use_ns and res.error and res.error.startswith("unshare: "):
            reason = res.error
            if isolation == "namespaces":
                raise SandboxUnavailable(f"namespaces refused by the kernel: {reason}")
            with _lock:
                _ns_state["refused"] = reason
            _warn_no_namespaces(reason)
            res = _run(argv, stdin, limits, wd, env or {}, readonly_paths, hidden_paths, network, False, uid, own_dir)
        elif use_ns and isolation == "auto":
            _ns_state.setdefault("refused", None)
        return res
    finally:
        if own_dir:
            _remove_tree(wd)
        elif uid is not None:
            _chown_tree(wd, *owner)  # the caller's directory goes back to the caller


def _prepare_dir(wd: Path, files: Mapping[str, bytes], uid: int | None) -> None:
    for name, data in files.items():
        p = (wd / name).resolve()
        if wd not in p.parents:
            raise ValueError(f"run_sandboxed: file {name!r} would land outside the working directory")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    if uid is not None:  # the program's own uid owns its directory and nothing else
        _chown_tree(wd, uid, uid)


def _remove_tree(top: Path) -> None:
    """Delete the run's own directory, also where the program took the permissions off its folders (a caller
    that is not root could not list them, and they stayed on the host): give them back, never through a link."""
    shutil.rmtree(top, ignore_errors=True)
    if not os.path.lexists(top):
        return
    try:
        os.chmod(top, 0o700)  # made by mkdtemp: never a link
    except OSError:
        pass
    for root, dirs, _ in os.walk(top):  # top-down: a folder is opened before the walk goes into it
        for n in dirs:
            try:
                if not os.path.islink(os.path.join(root, n)):
                    os.chmod(os.path.join(root, n), 0o700)
            except OSError:
                pass
    shutil.rmtree(top, ignore_errors=True)
    if os.path.lexists(top):
        log.warning("sandbox working directory %s could not be removed", top)


def _chown_tree(top: Path, uid: int, gid: int) -> None:
    """Give ``top`` and everything under it to uid:gid, never following links."""
    os.lchown(top, uid, gid)
    for root, dirs, names in os.walk(top):
        for n in dirs + names:
            try:
                os.lchown(os.path.join(root, n), uid, gid)
            except OSError:
                pass


def _run(argv, stdin, limits: Limits, wd: Path, env, readonly_paths, hidden_paths, network: bool, use_ns: bool,
         uid: int | None, own_dir: bool = True) -> SandboxResult:
    user_ns = use_ns and os.geteuid() != 0
    rl = limits.rlimits()
    if uid is None:  # RLIMIT_NPROC counts all processes of our own uid: allow for the ones already running
        rl["RLIMIT_NPROC"] = [v + _count_tasks(os.getuid()) for v in rl["RLIMIT_NPROC"]]
    hide = [str(p) for p in (default_hidden() if hidden_paths is None else hidden_paths)]
    home = os.environ.get("HOME")
    if home and home not in hide and home != "/":
        hide.append(home)
    read_fd, write_fd = os.pipe()
    cfg = {
        "argv": [str(a) for a in argv], "env": {"PATH": MINIMAL_PATH, **{str(k): str(v) for k, v in env.items()}},
        "workdir": str(wd), "uid": None if user_ns else uid, "rlimits": rl, "wall_seconds": limits.wall_seconds,
        "namespaces": use_ns, "user_ns": user_ns, "network": network, "status_fd": write_fd,
        "hide": hide, "readonly": [os.path.realpath(p) for p in readonly_paths],
        "program_memory": limits.program_memory_bytes,
        "disk_bytes": limits.disk_bytes if own_dir else None,  # a caller's directory keeps what is written
    }
    stdin_f = _stdin_file(stdin)
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", _STAGE, json.dumps(cfg)], stdin=stdin_f, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env={}, cwd="/", start_new_session=True, pass_fds=(write_fd,))
    except OSError as e:
        os.close(read_fd)
        return SandboxResult(None, None, b"", b"", False, False, False, 0.0, "namespaces" if use_ns else "none",
                             error=f"cannot start the sandbox stage: {e}")
    finally:
        os.close(write_fd)
        stdin_f.close()
    out, err, status, truncated = _collect(proc, read_fd, limits)
    seconds = time.perf_counter() - t0
    res = _result(status, out, err, truncated, seconds, use_ns, limits, proc.returncode)
    res.uid = cfg["uid"]
    cgroup = next((r["cgroup"] for r in status if r.get("cgroup")), None)
    if cgroup:
        remove_cgroup(cgroup)
    return res


def remove_cgroup(path: str, seconds: float = 5.0) -> None:
    """Remove a run's cgroup once the stage is gone: kill any straggler still in it, then rmdir."""
    if not os.path.basename(path).startswith("rewardkit-sandbox-"):
        return
    end = time.monotonic() + seconds
    while True:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > end:
                log.warning("sandbox cgroup %s could not be removed (still in use)", path)
                return
        try:
            with open(os.path.join(path, "cgroup.procs")) as f:
                for pid in f.read().split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (ProcessLookupError, PermissionError, ValueError):
                        pass
        except OSError:
            pass
        time.sleep(0.01)


def _stdin_file(data: bytes | None):
    if data is None:
        return open(os.devnull, "rb")
    f = tempfile.TemporaryFile()
    f.write(data)
    f.seek(0)
    return f


def _collect(proc: subprocess.Popen, status_fd: int, limits: Limits) -> tuple[bytes, bytes, list[dict], bool]:
    """Read stdout, stderr and the status pipe as they come; kill on flood or past the backstop deadline."""
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    bufs = {out_fd: bytearray(), err_fd: bytearray(), status_fd: bytearray()}
    sel = selectors.DefaultSelector()
    for fd in bufs:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    backstop = time.monotonic() + limits.wall_seconds + 5.0
    truncated = False
    term_sent: float | None = None
    exited_at: float | None = None
    try:
        while sel.get_map():
            now = time.monotonic()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > 1.0:
                break  # the stage is gone; a straggler holding a pipe gets no more time
            if now > backstop or (term_sent is not None and now - term_sent > 2.0):
                _kill_group(proc, signal.SIGKILL)
            for key, _ in sel.select(timeout=0.05):
                try:
                    chunk = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                buf = bufs[key.fd]
                if key.fd == status_fd:
                    buf += chunk
                    continue
                room = limits.output_bytes - (len(bufs[out_fd]) + len(bufs[err_fd]))
                buf += chunk[:max(room, 0)]
                if len(chunk) > room and not truncated:
                    truncated = True
                    term_sent = time.monotonic()
                    _kill_group(proc, signal.SIGTERM)  # the stage kills the program's whole namespace / tree
        proc.wait(timeout=limits.wall_seconds + 10)
    finally:
        sel.close()
        os.close(status_fd)
        proc.stdout.close()
        proc.stderr.close()
    status = []
    for line in bytes(bufs[status_fd]).decode("utf-8", "replace").splitlines():
        try:
            status.append(json.loads(line))
        except json.JSONDecodeError:
            status.append({"stage_error": f"unreadable status line {line[:200]!r}"})
    return bytes(bufs[out_fd]), bytes(bufs[err_fd]), status, truncated


def _kill_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        if sig == signal.SIGTERM:
            proc.send_signal(sig)
        else:
            os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _result(status: list[dict], out: bytes, err: bytes, truncated: bool, seconds: float, use_ns: bool,
            limits: Limits, stage_rc: int | None) -> SandboxResult:
    merged: dict = {}
    notes: list[str] = []
    for rec in status:
        notes.extend(rec.pop("notes", []))
        merged.update(rec)
    rc, sig = merged.get("returncode"), merged.get("signal")
    error = merged.get("stage_error")
    if error is None and merged.get("killed") == "terminated" and not truncated:  # a SIGTERM not sent on a flood
        error = "the sandbox stage was terminated from outside (SIGTERM) before the program finished"
    if error is None and "returncode" not in merged and not merged.get("killed") and not truncated:
        error = f"the sandbox stage ended without a report (exit status {stage_rc}): {err[-500:]!r}"
    cpu = float(merged.get("cpu_seconds", 0.0))
    cpu_exceeded = sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= math.ceil(limits.cpu_seconds) - 0.05)
    return SandboxResult(
        returncode=rc, signal=sig, stdout=out, stderr=err, timed_out=bool(merged.get("timed_out")),
        cpu_exceeded=cpu_exceeded, output_truncated=truncated, seconds=seconds,
        isolation_used="namespaces" if use_ns else "none", cpu_seconds=cpu,
        max_rss_bytes=int(merged.get("max_rss_bytes", 0)), error=error, notes=notes,
        memory_bound=str(merged.get("memory_bound", "rlimit")), disk_bound=str(merged.get("disk_bound", "file")),
        memory_exceeded=bool(merged.get("memory_exceeded")), memory_at_cap=bool(merged.get("memory_at_cap")),
        user_namespaces=str(merged.get("user_namespaces", "allowed")),
        peak_memory_bytes=int(merged.get("peak_memory_bytes", 0)))


def _count_tasks(uid: int) -> int:
    """Processes and threads now running as ``uid`` (what RLIMIT_NPROC counts)."""
    n = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    n += len(os.listdir(f"/proc/{name}/task"))
            except OSError:
                continue
    return n
