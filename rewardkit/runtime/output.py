"""A job's output ``OUT`` and the files beside it, owned by one ``JobOutput`` (``rewardkit score`` and
``rewardkit eval generate`` alike): the manifest, the lock, atomic rewrites, repair, the retry merge.

``OUT.manifest.json`` records what produced the rows (scorer, options, judge spec, input path and SHA-256,
rewardkit version) and is written atomically before the first row; ``OUT.lock`` carries an exclusive
``flock`` for the life of a job and is removed when it ends; ``OUT.rejects.jsonl`` holds rejected input records; ``OUT.retry.jsonl``
journals the rows of a ``--retry-failed`` run until they are merged into ``OUT`` in one atomic rename.

A file is rewardkit's only if rewardkit made it: ``OUT`` and its side files only when a rewardkit manifest
lies beside them, ``OUT.lock`` only when it holds a rewardkit lock record. Anything else (a file without a
manifest, an empty one, a device, a FIFO, a symbolic link) is refused and never touched, and so is a path that
names a folder (``x/``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import json
import math
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
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


def beside(out: str | Path, suffix: str) -> Path:
    """The file next to ``OUT`` named ``OUT`` + ``suffix`` (its rejects, manifest, lock or retry journal)."""
    out = Path(out)
    return out.with_name(out.name + suffix)


def rejects_path(out: str | Path) -> Path:
    return beside(out, ".rejects.jsonl")


def manifest_path(out: str | Path) -> Path:
    return beside(out, ".manifest.json")


def lock_path(out: str | Path) -> Path:
    return beside(out, ".lock")


def retry_path(out: str | Path) -> Path:
    """The journal of a ``--retry-failed`` run: its new rows, merged into ``OUT`` atomically at the end."""
    return beside(out, ".retry.jsonl")


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


def fsync_dir(d: Path) -> None:
    """Make a rename or a new file in ``d`` durable (fsync the folder itself)."""
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
    fsync_dir(path.parent)


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
    """What a scoring job's rows depend on; a resumed job must match it field for field (the path is informative).

    ``digest``: the input's SHA-256 when already known (a pipe is hashed as it is read, once)."""
    opts = scorer_config(scorer, options)
    return output_manifest("score", getattr(scorer, "name", type(scorer).__name__), opts, inp,
                           digest or input_digest(inp), fmt=fmt, group_key=group_key, fields=fields,
                           with_texts=with_texts)


def output_manifest(job: str, name: str | None, options: dict[str, Any], inp: str | Path | None,
                    digest: str | None, *, fmt: str | None = None, group_key: str | None = None,
                    fields: dict[str, str] | None = None, with_texts: bool = False) -> dict[str, Any]:
    """The manifest of any job that writes an output (``score``, ``eval generate``): the job, its scorer or
    model, its options (values shown as ``_plain`` shows them: credentials masked), its input."""
    from rewardkit.version import __version__

    opts = {k: _plain(v) for k, v in sorted(options.items())}
    where = inp
    if inp is not None and file_kind(inp, follow=True) in ("regular file", "directory"):
        where = Path(inp).resolve()
    return {"rewardkit_output": MANIFEST_FORMAT, "rewardkit_version": __version__, "job": job,
            "scorer": name, "options": opts, "judge": opts.get("judge"),
            "input": {"path": None if where is None else str(where), "sha256": digest},
            "format": fmt, "group_key": group_key, "fields": fields or None, "with_texts": with_texts or None}


def _mismatch(old: dict, new: dict) -> list[str]:
    out = []
    if old.get("job", "score") != new.get("job", "score"):  # manifests before the "job" field: score's
        out.append(f"job {json.dumps(old.get('job', 'score'))} (now {json.dumps(new.get('job', 'score'))})")
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
    for p in (out, *side_files(out), lock_path(out)):  # the retry journal too: a fresh start removes it
        if _same_file(p, inp) or (inp.is_dir() and inp.resolve() in p.resolve().parents):
            raise JobError(f"{out}: --out would write over or into the input {inp}; choose another --out")


def check_output(out: Path, manifest: dict, restart: bool) -> bool:
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
# the second form: older releases; both bounded (a record is at most 40 bytes), so a longer file whose first 64 bytes
# read like one (a user's file of digits) is not taken for a lock
_LOCK_RE = re.compile(rb"rewardkit lock, pid {1,10}(\d{1,10})\n|(\d{1,10})")


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


# ------------------------------------------------------------------------------------ the owner


def _names_a_folder(raw: str) -> bool:
    """Whether the path as written names a folder whatever is there: a trailing separator, ``.``, ``..``, ``x/.``
    (``pathlib`` drops a trailing ``/`` and ``/.``, so this reads the text as given)."""
    seps = "/" + (os.sep if os.sep != "/" else "") + (os.altsep or "")
    last = re.split(f"[{re.escape(seps)}]", raw)[-1]
    return last in ("", ".", "..")


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and the folders above it that do not exist yet, topmost first; a JobError when the nearest
    existing one is not a folder (``--out notes.txt/o.jsonl``)."""
    missing = []
    while not os.path.lexists(folder) and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    if not folder.is_dir():
        raise JobError(f"{folder}: is a {file_kind(folder, follow=True) or 'broken link'}, not a folder; "
                       "--out must lie in a folder")
    return missing[::-1]


class JobOutput:
    """The one owner of a job's output ``OUT`` (``rewardkit score`` and ``rewardkit eval generate`` alike, as
    lm-eval's ``EvaluationTracker`` owns its output path): every rule about ``OUT`` lives here.

    ``claim()`` makes every check and creates nothing: a path that names a folder, the input itself, a file no
    rewardkit job wrote (no manifest beside it) or another job's (another manifest), a foreign or held lock
    are refused and left byte for byte as they were. ``open()`` then creates the missing folders, takes the
    lock, checks again under it, starts over where it must and writes the manifest before the first row; the
    folders it made go again if the job fails before that. Under the lock: ``done()`` (the rows already
    written, a half-written last line cut off), ``append()`` (rows, flushed and fsync'd), ``reject()`` (input
    records set aside) and ``merge()`` (one row per id in the input's order, the retry journal merged by one
    atomic rename)::

        out = JobOutput(path, manifest, restart=False, inp=input_path).claim()
        with out.open():
            done = out.done()
            out.append(new_rows, journal=retrying)
            out.merge(ids)
    """

    def __init__(self, path: str | Path, manifest: dict[str, Any], *, restart: bool = False,
                 inp: str | Path | None = None) -> None:
        self.raw = os.fspath(path)
        self.path = Path(path)
        self.manifest = manifest
        self.restart = restart
        self.inp = None if inp is None else Path(inp)
        self.last: dict[Any, dict] = {}  # the last row of each id: OUT's, then the journal's, then this run's
        self._rows: list[dict] = []  # OUT's rows, in file order
        self._folders: list[Path] = []
        self._journaled = False

    @property
    def journal(self) -> Path:
        return retry_path(self.path)

    def claim(self) -> JobOutput:
        """Refuse, creating nothing, every ``OUT`` this job may not write (see the class docstring)."""
        self.check_path()
        check_output(self.path, self.manifest, self.restart)  # refuses what is not ours, untouched
        OutputLock.check(self.path)  # a foreign lock, or another job's
        return self

    def check_path(self) -> None:
        """The checks that need no manifest (made before a piped input is read): a path that names a folder,
        the input itself or a file inside it, a missing folder above it below something that is no folder."""
        out = self.path
        if out.is_dir() and not out.is_symlink():
            raise JobError(f"{self.raw}: is a directory; --out must be a file")
        if _names_a_folder(self.raw):
            raise JobError(f"{self.raw}: names a folder (a path ending in '/', '.' or '..'); --out must be a file")
        if self.inp is not None and file_kind(self.inp, follow=True) in ("regular file", "directory"):
            check_not_input(self.inp, out)
        self._folders = _missing_folders(out.parent)

    @contextlib.contextmanager
    def open(self, on_mkdir: Callable[[Path], None] | None = None) -> Iterator[JobOutput]:
        """Folders, lock, the checks again under it, a fresh start where the manifest differs (``restart``) or
        none was there, the manifest; the lock is released (and ``OUT.lock`` removed) when the block ends."""
        created: list[Path] = []
        try:  # the folders made so far go again if a later one, ``on_mkdir`` or anything below fails
            for d in self._folders:
                d.mkdir(exist_ok=True)
                created.append(d)
            if created and on_mkdir:
                on_mkdir(created[0])
            with OutputLock(self.path):
                out = self.path
                fresh = check_output(out, self.manifest, self.restart)  # another job may have written
                for base in (out, manifest_path(out)):  # staging files of a rewrite killed before its rename
                    for tmp in stale_temp_files(base):
                        tmp.unlink(missing_ok=True)
                if fresh:  # a manifest lies beside them, or none of them exists: ours to remove
                    for p in (out, rejects_path(out), self.journal, manifest_path(out)):
                        p.unlink(missing_ok=True)
                if not manifest_path(out).exists():
                    write_atomic(manifest_path(out), (json.dumps(self.manifest, indent=1) + "\n").encode())
                created = []  # the job has written: its folders stay
                yield self
        finally:
            for d in reversed(created):  # refused before writing: the folders made for it go again (if empty)
                try:
                    d.rmdir()
                except OSError:
                    break

    def done(self) -> dict[Any, dict]:
        """The last row of each id already written: ``OUT``'s, then the retry journal's (half-written last
        lines cut off: the file is known to be this job's)."""
        self._rows = repair_jsonl(self.path)
        journaled = repair_jsonl(self.journal)
        self._journaled = bool(journaled)
        self.last = {}
        for r in [*self._rows, *journaled]:
            self.last[r.get("id")] = r
        return dict(self.last)

    def reject(self, rows: Iterable[dict]) -> None:
        """Append rejected input records to ``OUT.rejects.jsonl``, each (path, line, field) once."""
        rp = rejects_path(self.path)
        known = {(r.get("path"), r.get("line"), r.get("field")) for r in repair_jsonl(rp)}
        new = []
        for r in rows:  # once against the file and within this batch
            key = (r.get("path"), r.get("line"), r.get("field"))
            if key not in known:
                known.add(key)
                new.append(dump_row(r))
        append_lines(rp, new)

    def append(self, rows: list[dict], *, journal: bool = False) -> None:
        """Append rows (flush + fsync). ``journal`` (a retry) or a journal left by a killed retry: into the
        journal, never into ``OUT``, so ``OUT`` holds one row per id at every moment."""
        into_journal = journal or self._journaled
        append_lines(self.journal if into_journal else self.path, [dump_row(r) for r in rows])
        self._journaled = self._journaled or (into_journal and bool(rows))
        if not into_journal:
            self._rows.extend(rows)
        for r in rows:
            self.last[r.get("id")] = r

    def merge(self, ids: list) -> list[dict]:
        """Make ``OUT`` one row per id, ``ids``' order first (then ids only ``OUT`` has), the journal's rows
        merged, by one atomic rename when anything differs; the journal is then removed. Returns the rows."""
        known = set(ids)
        order = [i for i in ids if i in self.last] + [i for i in self.last if i not in known]
        rows = self._rows
        if self.journal.exists() or [r.get("id") for r in rows] != order:
            rows = [self.last[i] for i in order]
            write_atomic(self.path, b"".join(dump_row(r) for r in rows))
        self.journal.unlink(missing_ok=True)
        return rows
