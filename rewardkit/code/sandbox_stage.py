"""The sandbox's trusted stage: runs as ``python -I -S sandbox_stage.py CONFIG_JSON`` (stdlib only).

Process tree (namespace mode)::

    parent (rewardkit.code.sandbox) -> S: this script, own session, outside the namespaces
                                   -> C: pid 1 of a new PID/mount/net/IPC/UTS namespace; sets up mounts
                                        -> T: the program (unprivileged uid, rlimits, clean env)

S enforces the wall-clock deadline and kills C on it (or on SIGTERM); the kernel then kills every process
of the namespace, daemons included. Without namespaces S forks T itself and, as a child subreaper,
collects and kills whatever T leaves behind. C and S report on the status fd as JSON lines.

The whole tree's memory: before anything else S makes a memory cgroup of its own (cgroup v2 where the
memory controller is delegated to us, else the v1 memory hierarchy; both need write access, i.e. root or a
delegated subtree), sets its limit and moves itself in, so C, T and everything T starts are counted
together; S reports the cgroup's path and the parent removes it. Where no cgroup can be made, S says why
and memory stays bounded per process only (RLIMIT_AS). The working directory: C mounts a tmpfs of
``disk_bytes`` over it (its prepared files copied in), so the program's files together cannot exceed it.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import signal
import sys
import time

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 32, 1024, 2048, 4096, 16384
MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 1 << 18, 1 << 21, 1 << 24
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
PR_CAPBSET_DROP, PR_SET_SECUREBITS, PR_SET_NO_NEW_PRIVS = 24, 28, 38
# SECBIT_NOROOT, _NO_SETUID_FIXUP, _KEEP_CAPS, _NO_CAP_AMBIENT_RAISE, each with its lock bit
_SECUREBITS_ALL_LOCKED = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
_FLAG_OF = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
            "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME, "strictatime": MS_STRICTATIME}

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


class StageError(Exception):
    """A setup step failed: reported as a runner error, never as the program's result."""


def _check(rc: int, what: str) -> None:
    if rc != 0:
        e = ctypes.get_errno()
        raise StageError(f"{what}: {errno.errorcode.get(e, e)} ({os.strerror(e)})")


def _mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(libc.mount(enc(src), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def _mounts() -> list[tuple[str, int]]:
    """(mount point, per-mount flags to keep) for every mount of this mount namespace."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            point = parts[4].encode().decode("unicode_escape")  # \040 etc.
            keep = 0
            for o in parts[5].split(","):
                keep |= _FLAG_OF.get(o, 0)
            out.append((point, keep))
    return out


def _remount_ro(point: str, keep: int) -> None:
    _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | keep)


def _snapshot(top: str) -> list[tuple[str, bytes | None, int]]:
    """(relative path, contents or None for a directory, mode) of everything under ``top``, links skipped."""
    out = []
    for root, dirs, names in os.walk(top):
        for d in dirs:
            p = os.path.join(root, d)
            if not os.path.islink(p):
                out.append((os.path.relpath(p, top), None, os.stat(p).st_mode & 0o7777))
        for n in names:
            p = os.path.join(root, n)
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    out.append((os.path.relpath(p, top), f.read(), os.stat(p).st_mode & 0o7777))
    return out


def _restore(top: str, files: list[tuple[str, bytes | None, int]], uid: int | None) -> None:
    for rel, data, mode in files:
        p = os.path.join(top, rel)
        if data is None:
            os.makedirs(p, mode=mode, exist_ok=True)
        else:
            with open(p, "wb") as f:
                f.write(data)
            os.chmod(p, mode)
        if uid is not None:
            os.lchown(p, uid, uid)


def _setup_mounts(cfg: dict) -> list[str]:
    """Everything read-only, hidden dirs under empty read-only tmpfs, the working directory read-write (on a
    tmpfs of ``disk_bytes`` when the sandbox owns it)."""
    notes = []
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    work = cfg["workdir"]
    prepared = _snapshot(work) if cfg.get("disk_bytes") else None
    keep_fds = {work: os.open(work, os.O_PATH | os.O_DIRECTORY)}
    for p in cfg["readonly"]:
        if os.path.exists(p):
            keep_fds.setdefault(p, os.open(p, os.O_PATH))
    for point, keep in _mounts():
        try:
            _remount_ro(point, keep)
        except StageError as e:
            if point == "/":
                raise
            notes.append(f"left as is: {e}")  # overmounted or special mounts; everything is uid-protected
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    hidden = []
    for d in cfg["hide"]:
        if os.path.isdir(d) and not os.path.islink(d) and d != "/":
            _mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
            hidden.append(d)
    for path, fd in keep_fds.items():
        if not any(path == h or path.startswith(h.rstrip("/") + "/") for h in hidden) and path != work:
            continue  # already visible (read-only) where it is
        is_dir = os.path.isdir(f"/proc/self/fd/{fd}")
        os.makedirs(path if is_dir else os.path.dirname(path), exist_ok=True)
        if not is_dir and not os.path.exists(path):
            open(path, "w").close()
        if path == work and prepared is not None:  # a fresh tmpfs of disk_bytes: all files together bounded
            owner = "" if cfg["uid"] is None else f",uid={cfg['uid']},gid={cfg['uid']}"
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={int(cfg['disk_bytes'])},mode=700{owner}")
            _restore(path, prepared, cfg["uid"])
            continue
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        if path == work:  # a bind copies the source mount's (now read-only) flags: make this one writable
            _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV)
        else:
            _remount_ro(path, MS_NOSUID | MS_NODEV)
    for d in hidden:
        _remount_ro(d, MS_NOSUID | MS_NODEV)
    for fd in keep_fds.values():
        os.close(fd)
    return notes


def _exec_program(cfg: dict, status_fd: int) -> None:
    """In T: drop to the sandbox uid, apply rlimits, close every other fd, exec. Never returns."""
    try:
        try:
            _write("/proc/self/oom_score_adj", "0")  # raising it needs no privilege
        except OSError:
            pass
        os.chdir(cfg["workdir"])
        uid = cfg["uid"]
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)  # an unprivileged uid: no capabilities left
        elif cfg["user_ns"]:
            _drop_capabilities()  # uid 0 of its own user namespace: take its capabilities away for good
        _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")  # setuid binaries gain nothing
        why = _forbid_user_namespaces()
        _report(status_fd, **({"notes": [why]} if why else {"user_namespaces": "refused"}))
        for name, (soft, hard) in cfg["rlimits"].items():
            resource.setrlimit(getattr(resource, name), (soft, hard))
        os.closerange(3, status_fd)
        os.closerange(status_fd + 1, 65536)
        os.execvpe(cfg["argv"][0], cfg["argv"], cfg["env"])
    except BaseException as e:  # noqa: BLE001 - report anything, then die
        _report(status_fd, stage_error=f"exec {cfg['argv'][0]!r}: {e}", exec_failed=True)
    os._exit(127)


# seccomp: refuse new user namespaces (unshare/clone with CLONE_NEWUSER; clone3, whose flags a filter cannot
# read, answers ENOSYS so libc falls back to clone). Without a user namespace of its own the program gets no
# capabilities, so it can mount nothing (a private tmpfs would escape the disk limit).
_ARCH = {"x86_64": (0xC000003E, 56, 272, 435), "aarch64": (0xC00000B7, 220, 97, 435)}  # audit arch, clone,
#                                                                                    unshare, clone3
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
_SECCOMP_ALLOW, _SECCOMP_ERRNO = 0x7FFF0000, 0x00050000


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _userns_filter(machine: str) -> list[tuple[int, int, int, int]] | None:
    """The BPF program (code, jt, jf, k) for ``machine``, or None where its syscall numbers are not known.
    Syscalls of another ABI (i386 on x86_64, x32) are refused outright."""
    if machine not in _ARCH:
        return None
    arch, clone, unshare, clone3 = _ARCH[machine]
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    deny, nosys = _SECCOMP_ERRNO | errno.EPERM, _SECCOMP_ERRNO | errno.ENOSYS
    return [
        (ld, 0, 0, 4),  # 0: seccomp_data.arch
        (jeq, 0, 8, arch),  # 1: another ABI -> 10
        (ld, 0, 0, 0),  # 2: seccomp_data.nr
        (jge, 6, 0, 0x40000000),  # 3: x32 syscall numbers -> 10
        (jeq, 6, 0, clone3),  # 4: -> 11
        (jeq, 1, 0, unshare),  # 5: -> 7
        (jeq, 0, 2, clone),  # 6: -> 7, else 9
        (ld, 0, 0, 16),  # 7: low word of args[0]: the flags of unshare and clone
        (jset, 1, 0, CLONE_NEWUSER),  # 8: -> 10, else 9
        (ret, 0, 0, _SECCOMP_ALLOW),  # 9
        (ret, 0, 0, deny),  # 10
        (ret, 0, 0, nosys),  # 11
    ]


def _forbid_user_namespaces() -> str | None:
    """Install the filter on this thread (inherited by every descendant, kept across exec; needs
    no_new_privs first); None, or why it could not be."""
    prog = _userns_filter(os.uname().machine)
    if prog is None:
        return f"no seccomp filter for {os.uname().machine}: new user namespaces stay possible"
    arr = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), arr)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        e = ctypes.get_errno()
        return f"seccomp refused ({errno.errorcode.get(e, e)}): new user namespaces stay possible"
    return None


def _drop_capabilities() -> None:
    """Clear every capability (bounding, effective, permitted, inheritable) and lock the securebits so
    that neither uid 0 nor exec gives any back."""
    _check(libc.prctl(PR_SET_SECUREBITS, _SECUREBITS_ALL_LOCKED, 0, 0, 0), "securebits")
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap}")
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    _check(libc.capset(header, (ctypes.c_uint32 * 6)()), "capset")


def _report(fd: int, **kw) -> None:
    try:
        os.write(fd, (json.dumps(kw) + "\n").encode())
    except OSError:
        pass


def _wait(pid: int) -> tuple[int, resource.struct_rusage]:
    while True:
        try:
            _, st, ru = os.wait4(pid, 0)
            return st, ru
        except ChildProcessError:
            raise
        except InterruptedError:
            continue


def _describe(st: int, ru) -> dict:
    d = {"cpu_seconds": ru.ru_utime + ru.ru_stime, "max_rss_bytes": ru.ru_maxrss * 1024}
    if os.WIFSIGNALED(st):
        d.update(returncode=None, signal=os.WTERMSIG(st))
    else:
        d.update(returncode=os.WEXITSTATUS(st), signal=None)
    return d


def _init_main(cfg: dict, fd: int) -> None:
    """C: pid 1 of the namespaces. Set up mounts, run T, reap everything, report T's status, exit."""
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    try:
        notes = _setup_mounts(cfg)
    except (StageError, OSError) as e:
        _report(fd, stage_error=f"namespace setup failed: {e}")
        os._exit(3)
    if notes:
        _report(fd, notes=notes)
    if cfg.get("disk_bytes"):
        _report(fd, disk_bound="tmpfs")
    t = os.fork()
    if t == 0:
        _exec_program(cfg, fd)
    while True:  # pid 1 reaps orphans too; stop when T itself is done
        try:
            pid, st, ru = os.wait4(-1, 0)
        except ChildProcessError:
            os._exit(3)
        if pid == t:
            _report(fd, **_describe(st, ru))
            os._exit(0)  # pid 1 exits: the kernel kills whatever is left in the namespace


def _kill_children_of(me: int) -> int:
    """SIGKILL every live process whose parent is ``me`` (orphans re-parented to this subreaper)."""
    n = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me:
            try:
                os.kill(int(name), signal.SIGKILL)
                n += 1
            except ProcessLookupError:
                pass
    return n


def mount_points(fstype: str, option: str | None = None) -> list[str]:
    """Mount points of ``fstype`` (with ``option`` among its super options) in /proc/self/mountinfo."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rfields = left.split(), right.split()
            if rfields and rfields[0] == fstype and (option is None or option in rfields[-1].split(",")):
                out.append(fields[4].encode().decode("unicode_escape"))
    return out


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def memory_cgroup(limit: int) -> tuple[str | None, str]:
    """Make a memory cgroup capped at ``limit`` bytes and move this process into it: (path, "cgroup v2"
    or "cgroup v1"), or (None, why not). Children inherit it, so it bounds the whole tree."""
    with open("/proc/self/cgroup") as f:
        own = dict((parts[1], parts[2]) for parts in (ln.rstrip("\n").split(":", 2) for ln in f) if len(parts) == 3)
    name = f"rewardkit-sandbox-{os.getpid()}"
    why = []
    for version in ("v2", "v1"):
        try:
            if version == "v2":
                if "" not in own or not mount_points("cgroup2"):
                    why.append("v2: no cgroup2 hierarchy")
                    continue
                base = mount_points("cgroup2")[0] + own[""]
                with open(os.path.join(base, "cgroup.controllers")) as f:
                    if "memory" not in f.read().split():
                        why.append("v2: the memory controller is not delegated here")
                        continue
                with open(os.path.join(base, "cgroup.subtree_control")) as f:
                    if "memory" not in f.read().split():
                        _write(os.path.join(base, "cgroup.subtree_control"), "+memory")
            else:
                key = next((k for k in own if "memory" in k.split(",")), None)
                points = mount_points("cgroup", "memory")
                if key is None or not points:
                    why.append("v1: no memory hierarchy")
                    continue
                base = points[0] + own[key]
            _sweep(base)
            path = os.path.join(base, name)
            os.mkdir(path, 0o755)
            try:
                if version == "v2":
                    _write(os.path.join(path, "memory.max"), str(limit))
                    for fname, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                        if os.path.exists(os.path.join(path, fname)):
                            _write(os.path.join(path, fname), value)
                else:
                    _write(os.path.join(path, "memory.limit_in_bytes"), str(limit))
                    if os.path.exists(os.path.join(path, "memory.memsw.limit_in_bytes")):
                        _write(os.path.join(path, "memory.memsw.limit_in_bytes"), str(limit))
                _write(os.path.join(path, "cgroup.procs"), str(os.getpid()))
            except OSError:
                os.rmdir(path)
                raise
            return path, f"cgroup {version}"
        except OSError as e:
            why.append(f"{version}: {e.strerror or e}")
    return None, "; ".join(why)


def _sweep(base: str) -> None:
    """Remove empty cgroups that killed sandbox stages left behind (rmdir refuses one still in use). A live
    stage's is kept: between its mkdir and its move into it, a concurrent run's sweep took it, and the run
    fell back to per-process limits."""
    try:
        names = [n for n in os.listdir(base) if n.startswith("rewardkit-sandbox-")]
    except OSError:
        return
    for n in names:
        pid = n.removeprefix("rewardkit-sandbox-")
        if pid.isdigit() and os.path.exists(f"/proc/{pid}"):  # its stage is still running
            continue
        try:
            os.rmdir(os.path.join(base, n))
        except OSError:
            pass


def _cgroup_report(path: str) -> dict:
    """Whether the kernel killed a process of the cgroup for memory, whether the tree's memory reached the
    cap at all (v2: ``max`` events; v1: ``failcnt``, or the peak at the limit: a tree held at its cap is
    reclaimed from, and may crawl until the deadline without an OOM kill), and its peak usage."""
    def read(name: str) -> str:
        try:
            with open(os.path.join(path, name)) as f:
                return f.read()
        except OSError:
            return ""

    def number(text: str) -> int:
        return int(text) if text.strip().isdigit() else 0

    events = dict(ln.split() for ln in (read("memory.events") or read("memory.oom_control")).splitlines()
                  if len(ln.split()) == 2)
    peak = number(read("memory.peak") or read("memory.max_usage_in_bytes"))
    limit = number(read("memory.max") or read("memory.limit_in_bytes"))
    killed = int(events.get("oom_kill", "0")) > 0 or int(events.get("oom", "0")) > 0
    at_cap = killed or int(events.get("max", "0")) > 0 or number(read("memory.failcnt")) > 0 or (
        limit > 0 and peak >= limit - (1 << 20))
    return {"memory_exceeded": killed, "memory_at_cap": at_cap, "peak_memory_bytes": peak}


class _Deadline(Exception):
    pass


def _quiet() -> None:
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGALRM, signal.SIG_IGN)


def main() -> None:
    cfg = json.loads(sys.argv[1])
    fd = cfg["status_fd"]
    os.set_inheritable(fd, False)
    wall = float(cfg["wall_seconds"])
    reason: list[str] = []

    def on_signal(signum, _frame):
        reason.append("deadline" if signum == signal.SIGALRM else "terminated")
        raise _Deadline

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGALRM, on_signal)
    cgroup = None
    if cfg.get("program_memory"):
        cgroup, how = memory_cgroup(int(cfg["program_memory"]))
        if cgroup:  # the kernel's OOM killer picks the program, never S or C (T resets its own score)
            try:
                _write("/proc/self/oom_score_adj", "-1000")
            except OSError:
                pass
        _report(fd, memory_bound=how if cgroup else "rlimit", cgroup=cgroup,
                **({} if cgroup else {"notes": [f"no memory cgroup ({how}): memory bounded per process only"]}))
    if cfg["namespaces"]:
        flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
        if not cfg["network"]:
            flags |= CLONE_NEWNET
        if cfg["user_ns"]:
            flags |= CLONE_NEWUSER
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(flags) != 0:
            e = ctypes.get_errno()
            _report(fd, stage_error=f"unshare: {errno.errorcode.get(e, e)} ({os.strerror(e)})")
            os._exit(3)
        if cfg["user_ns"]:
            for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"0 {uid} 1"),
                               ("/proc/self/gid_map", f"0 {gid} 1")):
                with open(path, "w") as f:
                    f.write(text)
    else:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.setitimer(signal.ITIMER_REAL, wall)
    child = os.fork()
    if child == 0:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        if cfg["namespaces"]:
            _init_main(cfg, fd)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        _exec_program(cfg, fd)
    st = ru = None
    try:
        st, ru = _wait(child)
        _quiet()
    except _Deadline:
        _quiet()
        if st is None:
            try:
                os.kill(child, signal.SIGKILL)  # in namespace mode: pid 1 dies, the kernel kills the rest
            except ProcessLookupError:
                pass
            st, ru = _wait(child)
        _report(fd, timed_out=reason[0] == "deadline", killed=reason[0])
    if not cfg["namespaces"]:
        # whatever T left (daemons included) was re-parented to us, the subreaper: kill until none is left
        _report(fd, **_describe(st, ru))
        for _ in range(1000):
            if not _kill_children_of(os.getpid()):
                break
            try:
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            except ChildProcessError:
                break
            time.sleep(0.001)
    mem = _cgroup_report(cgroup) if cgroup else {}
    if mem:
        _report(fd, **mem)
    if cfg["namespaces"] and os.WIFSIGNALED(st) and not reason and not mem.get("memory_exceeded"):
        _report(fd, stage_error=f"sandbox init died by signal {os.WTERMSIG(st)}")
    os._exit(0)


if __name__ == "__main__":
    main()
