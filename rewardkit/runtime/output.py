"""The files a scoring job owns beside its output ``OUT``: the manifest, the lock, atomic rewrites, repair.

``OUT.manifest.json`` records what produced the rows (scorer, options, judge spec, input path and SHA-256,
rewardkit version) and is written atomically before the first row; ``OUT.lock`` carries an exclusive
``flock`` for the life of a job and is removed when it ends; ``OUT.rejects.jsonl`` holds rejected input records; ``OUT.retry.jsonl``
journals the rows of a ``--retry-failed`` run until they are merged into ``OUT`` in one atomic rename.

A file is rewardkit's only if rewardkit made it: ``OUT`` and its side files only when a rewardkit manifest
lies beside them, ``OUT.lock`` only when it holds a rewardkit lock record. Anything else (a file without a
manifest, an empty one, a device, a FIFO, a symbolic link) is refused and never touched.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import math
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rewardkit.backends.spec import redact
from rewardkit.scoring import Scorer

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Windows
    fcntl = None  # type: ignore[assignment]

MANIFEST_FORMAT = 1


class JobError(RuntimeError):
    """The job cannot start or go on (output not ours, another job's, locked, bad option): one line."""



# ------------------------------------------------------------------------------------ side files


def rejects_path(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".rejects.jsonl")


def manifest_path(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".manifest.json")


def lock_path(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".lock")


def retry_path(out: str | Path) -> Path:
    """The journal of a ``--retry-failed`` run: its new rows, merged into ``OUT`` atomically at the end."""
    out = Path(out)
    return out.with_name(out.name + ".retry.jsonl")


def side_files(out: str | Path) -> tuple[Path, ...]:
    """The files a job keeps beside ``OUT`` (besides the lock): rejects, retry journal, manifest."""
    return rejects_path(out), retry_path(out), manifest_path(out)


_KINDS = ((stat.S_ISLNK, "symbolic link"), (stat.S_ISFIFO, "named pipe (FIFO)"), (stat.S_ISCHR, "character device"),
          (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket"), (stat.S_ISDIR, "directory"),
          (stat.S_ISREG, "regular file"))


def file_kind(path: str | Path, follow: bool = False) -> str | None:
    """What is at ``path`` (``"regular file"``, ``"symbolic link"``, ``"named pipe (FIFO)"``, a device, ...),
    or None when nothing is; links are not followed unless ``follow``."""
    try:
        mode = (os.stat if follow else os.lstat)(path).st_mode
    except FileNotFoundError:
        return None
    return next((name for test, name in _KINDS if test(mode)), "special file")


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_path(path: Path) -> Path:
    """Where ``write_atomic`` stages ``path`` (a name only rewardkit makes; see ``stale_temp_files``)."""
    return path.with_name(f".{path.name}.rewardkit-{os.getpid()}.tmp")


def stale_temp_files(path: Path) -> list[Path]:
    """Staging files of ``write_atomic(path)`` left by a killed rewrite (this name pattern, nothing else)."""
    pat = re.compile(rf"\.{re.escape(path.name)}\.(?:rewardkit-)?\d+\.tmp")  # older releases: .NAME.PID.tmp
    try:
        return [p for p in path.parent.iterdir() if pat.fullmatch(p.name) and file_kind(p) == "regular file"]
    except FileNotFoundError:
        return []


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data`` all at once: temp file in the same folder, fsync, rename, fsync dir."""
    tmp = temp_path(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(path.parent)


def append_lines(path: Path, lines: Iterable[bytes]) -> None:
    data = b"".join(lines)
    if not data:
        return
    with open(path, "ab") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def dump_row(row: dict) -> bytes:
    """One JSONL line; text that is not valid Unicode (a lone surrogate) is written \\u-escaped."""
    try:
        return (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(row) + "\n").encode("ascii")


def repair_jsonl(path: Path) -> list[dict]:
    """Cut a half-written last line off ``path`` (in place) and return the complete rows.

    Call it only on a file known to be this job's (``score_file`` checks the manifest first).
    """
    if not path.exists():
        return []
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    rows = []
    for n, line in enumerate(data[:end].splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError) as e:
            raise JobError(f"{path}:{n}: existing output line is corrupt ({e}); use --restart to start over") from None
        if not isinstance(row, dict):
            raise JobError(f"{path}:{n}: existing output line is not a JSON object; use --restart to start over")
        rows.append(row)
    if end < len(data):
        with open(path, "r+b") as f:
            f.truncate(end)
            f.flush()
            os.fsync(f.fileno())
    return rows


# ------------------------------------------------------------------------------------ the manifest


def input_digest(path: str | Path) -> str:
    """SHA-256 of a file, or of a dataset folder's files (relative names and contents, sorted)."""
    p = Path(path)
    h = hashlib.sha256()
    files = sorted(x for x in p.rglob("*") if x.is_file()) if p.is_dir() else [p]
    for f in files:
        if p.is_dir():
            h.update(str(f.relative_to(p)).encode("utf-8", "surrogateescape") + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def _plain(v: Any) -> Any:
    """A JSON-able, comparable form of an option value (a backend instance by its spec or class), with the
    credentials of any URL in it masked (the manifest is stored, and world-readable)."""
    if isinstance(v, str):
        return redact(v)
    if v is None or isinstance(v, (bool, int)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    spec = getattr(v, "spec", None)
    if isinstance(spec, str):
        return redact(spec)
    model = getattr(v, "model_id", None)  # a backend instance: its class and the model it serves
    return f"{type(v).__module__}.{type(v).__qualname__}" + (f":{redact(model)}" if model else "")


def scorer_config(scorer: Scorer, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The scorer's options: its ``options`` dataclass when it has one, else the options it was built with."""
    opts = getattr(scorer, "options", None)
    if dataclasses.is_dataclass(opts) and not isinstance(opts, type):
        d = {f.name: getattr(opts, f.name) for f in dataclasses.fields(opts)}
    else:
        d = dict(options or {})
    return {k: _plain(v) for k, v in sorted(d.items())}


def job_manifest(scorer: Scorer, inp: str | Path, *, options: dict[str, Any] | None = None,
                 fmt: str | None = None, group_key: str | None = None, digest: str | None = None,
                 fields: dict[str, str] | None = None, with_texts: bool = False) -> dict[str, Any]:
    """What a job's rows depend on; a resumed job must match it field for field (the path is informative).

    ``digest``: the input's SHA-256 when already known (a pipe is hashed as it is read, once)."""
    from rewardkit.version import __version__

    opts = scorer_config(scorer, options)
    sha = digest or input_digest(inp)
    where = Path(inp).resolve() if file_kind(inp, follow=True) in ("regular file", "directory") else inp
    return {"rewardkit_output": MANIFEST_FORMAT, "rewardkit_version": __version__,
            "scorer": getattr(scorer, "name", type(scorer).__name__), "options": opts,
            "judge": opts.get("judge"), "input": {"path": str(where), "sha256": sha},
            "format": fmt, "group_key": group_key, "fields": fields or None, "with_texts": with_texts or None}


def _mismatch(old: dict, new: dict) -> list[str]:
    out = []
    for k in ("rewardkit_output", "rewardkit_version", "scorer", "options", "judge", "format", "group_key", "fields",
              "with_texts"):
        if old.get(k) != new.get(k):
            out.append(f"{k} {json.dumps(old.get(k))} (now {json.dumps(new.get(k))})")
    if (old.get("input") or {}).get("sha256") != new["input"]["sha256"]:
        out.append(f"input {(old.get('input') or {}).get('path')} with other contents (now {new['input']['path']})")
    return out


def _read_manifest(out: Path) -> dict | None:
    mp = manifest_path(out)
    if not mp.exists():
        return None
    try:
        m = json.loads(mp.read_bytes())
    except (ValueError, RecursionError, UnicodeDecodeError):
        m = None
    if not isinstance(m, dict) or m.get("rewardkit_output") is None:
        raise JobError(f"{mp}: not a rewardkit manifest; move it and {out.name} away or choose another --out")
    return m


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def check_not_input(inp: Path, out: Path) -> None:
    """Refuse an output (or one of its side files) that is the input or lies inside an input folder."""
    for p in (out, manifest_path(out), rejects_path(out), lock_path(out)):
        if _same_file(p, inp) or (inp.is_dir() and inp.resolve() in p.resolve().parents):
            raise JobError(f"{out}: --out would write over or into the input {inp}; choose another --out")


def check_output(inp: Path, out: Path, manifest: dict, restart: bool) -> bool:
    """Refuse an output that is not ours or another job's; True if it must be started over.

    Ours means a regular file (or nothing yet) with a rewardkit manifest beside it. Without a manifest,
    an existing ``OUT`` (empty or not, a device, a FIFO, a link) and existing side files are foreign.
    """
    for p in (out, *side_files(out)):
        kind = file_kind(p)
        if kind not in (None, "regular file"):
            raise JobError(f"{p}: is a {kind}, not a regular file; left as it is: choose another --out")
    old = _read_manifest(out)
    if old is None:
        if out.exists():
            raise JobError(f"{out}: exists and is not a rewardkit output (no {manifest_path(out).name}); "
                           "left as it is: move it away or choose another --out")
        for p in side_files(out):
            if p.exists():
                raise JobError(f"{p}: exists but {out.name} has no rewardkit manifest, so it is not this job's; "
                               "left as it is: move it away or choose another --out")
        return True  # nothing there: a fresh job
    empty = not out.exists() or out.stat().st_size == 0
    diff = _mismatch(old, manifest)
    if diff and empty:
        return True
    if diff and not restart:
        raise JobError(f"{out}: was written by another job: {'; '.join(diff)}. Left as it is: "
                       "use --restart to start over or choose another --out")
    return restart


LOCK_RECORD = b"rewardkit lock, pid %10d\n"  # fixed width: rewritten in place by one pwrite
_LOCK_RE = re.compile(rb"rewardkit lock, pid +(\d+)\n|(\d+)")  # the second form: older releases


class OutputLock:
    """An exclusive, non-blocking flock on ``OUT.lock`` for the life of a job, removed when the job ends.

    The lock file is created whole (written aside, then linked into place), so it always holds a lock
    record; an ``OUT.lock`` without one (another program's file, an empty file, a link, a FIFO) is refused
    and left as it is. The job that holds the lock removes the file on exit, while still holding it and only
    if the path still names the file it locked; a job that takes the lock checks the same after its flock and
    starts over if the file was removed meanwhile, so two jobs never hold one ``OUT`` at once. A lock left by
    a killed job holds no flock: the next job takes it over, and removes it when it ends.
    """

    def __init__(self, out: Path):
        self.path = lock_path(out)
        self.fd: int | None = None

    @staticmethod
    def check(out: Path) -> None:
        """Refuse, creating nothing, where ``__enter__`` would: ``OUT.lock`` is not rewardkit's, or another job
        holds it (the lock itself is taken later, after the output's other checks)."""
        path = lock_path(out)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return
        except OSError as e:
            if e.errno != errno.ELOOP:
                raise
            raise JobError(_not_a_lock(path, "symbolic link")) from None
        try:
            _check_record(path, fd)
            _try_flock(path, fd)
        finally:
            os.close(fd)  # a probe's flock ends with its descriptor

    def _open(self) -> int:
        flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        for _ in range(2):
            try:
                return os.open(self.path, flags)
            except FileNotFoundError:
                tmp = temp_path(self.path)
                try:
                    tmp.write_bytes(LOCK_RECORD % os.getpid())
                    os.link(tmp, self.path)  # fails if another job created it meanwhile: then open that one
                except FileExistsError:
                    pass
                finally:
                    tmp.unlink(missing_ok=True)
            except OSError as e:
                if e.errno != errno.ELOOP:
                    raise
                break
        raise JobError(_not_a_lock(self.path, file_kind(self.path) or "file that vanished"))

    def __enter__(self) -> OutputLock:
        if fcntl is None:  # pragma: no cover
            return self
        for _ in range(100):  # each retry means another job removed the lock file between our open and flock
            fd = self._open()
            try:
                _check_record(self.path, fd)
                _try_flock(self.path, fd)
                if _names(self.path, fd):
                    os.pwrite(fd, LOCK_RECORD % os.getpid(), 0)  # same length as any record: never half empty
                    self.fd = fd
                    return self
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)
        raise JobError(f"{self.path}: removed and re-created 100 times while taking it; choose another --out")

    def __exit__(self, *exc: Any) -> None:
        if self.fd is None:
            return
        try:
            if _names(self.path, self.fd):
                self.path.unlink()  # still under our flock: a job that opened it meanwhile retries
        except OSError:
            pass  # the job's outcome stands; a lock file left behind is taken over by the next job
        finally:
            os.close(self.fd)  # releases the lock
            self.fd = None


def _not_a_lock(path: Path, what: str) -> str:
    return f"{path}: exists and is not a rewardkit lock ({what}); left as it is: move it away or choose another --out"


def _check_record(path: Path, fd: int) -> None:
    kind = next((name for test, name in _KINDS if test(os.fstat(fd).st_mode)), "special file")
    record = os.pread(fd, 64, 0) if kind == "regular file" else b""
    if kind != "regular file" or not _LOCK_RE.fullmatch(record):
        raise JobError(_not_a_lock(path, f"{kind}, {len(record)} bytes"))


def _try_flock(path: Path, fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        m = _LOCK_RE.fullmatch(os.pread(fd, 64, 0))
        other = (m.group(1) or m.group(2)).decode() if m else "?"
        raise JobError(f"{path.with_suffix('')}: another rewardkit job (pid {other}) is writing it; "
                       "wait for it or choose another --out") from None


def _names(path: Path, fd: int) -> bool:
    """Whether ``path`` is still the file open at ``fd`` (not removed or replaced since it was opened)."""
    try:
        a, b = os.lstat(path), os.fstat(fd)
    except FileNotFoundError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
