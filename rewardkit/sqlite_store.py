"""Fork-safe, private, sealed sqlite storage shared by the persistent caches (judge cache, verification cache)."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def connect(path: Any, timeout: float) -> Iterator[sqlite3.Connection]:
    """A connection in WAL mode for one operation, closed after it (autocommit; use ``write`` for writes).

    SQLite connections must not cross a fork (its locks and WAL-index state are per process: a child
    that inherits an open connection's state can lose committed writes), and a cache operation costs far
    less than the model or prover call it saves, so no connection is kept open between operations."""
    conn = sqlite3.connect(str(path), timeout=timeout, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        _wal(conn, timeout)
        yield conn
    finally:
        conn.close()


def _wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Put the database in WAL mode (it stays so: a database already in it is left alone). While another
    connection writes to a database still in rollback mode (several processes opening a new cache at once),
    SQLite answers the switch with SQLITE_BUSY at once, without its busy handler; so it is retried here
    until ``timeout``, as the busy handler would wait."""
    deadline, delay = time.monotonic() + timeout, 0.001
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if not _busy(e) or time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(2 * delay, 0.05)


def _busy(e: sqlite3.OperationalError) -> bool:
    """Whether ``e`` is SQLITE_BUSY, or one of its extended codes (same low byte, e.g. SQLITE_BUSY_RECOVERY).
    Python 3.10's errors carry no code (``sqlite_errorcode`` and ``sqlite3.SQLITE_BUSY`` are 3.11's): there the
    message says it."""
    code = getattr(e, "sqlite_errorcode", None)
    return code & 0xFF == 5 if isinstance(code, int) else str(e).startswith("database is locked")


def write(conn: sqlite3.Connection, sql: str, rows: list[tuple]) -> None:
    """``executemany`` in one transaction that takes the write lock up front (waits under busy_timeout)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(sql, rows)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


# ------------------------------------------------------------------------------------ private, sealed stores
def private_path(path: Any) -> Path:
    """Create ``path``'s missing parent folders (0700) and the file itself (0600) if absent.

    Modes are set on what this call creates; sqlite gives its ``-wal``/``-shm`` files the database
    file's mode. An existing file or folder keeps the mode its owner gave it."""
    p = Path(path)
    private_dir(p.parent)
    try:
        os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
    return p


def private_dir(path: Any) -> Path:
    """Create the missing folders of ``path`` with mode 0700 (existing ones are left as they are)."""
    d = Path(path)
    for missing in reversed([x for x in [d, *d.parents] if not x.exists()]):
        try:
            missing.mkdir(mode=0o700)
        except FileExistsError:
            pass
    return d


def cache_secret() -> bytes:
    """The key that seals cache entries: ``$REWARDKIT_CACHE_SECRET``, else a random per-user key in
    ``$REWARDKIT_CACHE/cache_secret.key`` (created 0600 on first use). Users who share a cache on
    purpose set the same ``REWARDKIT_CACHE_SECRET``."""
    env = os.environ.get("REWARDKIT_CACHE_SECRET")
    if env:
        return env.encode()
    from rewardkit.backends.embedded import cache_root

    path = cache_root() / "cache_secret.key"
    if not path.exists():
        private_dir(path.parent)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        try:
            os.link(tmp, path)  # atomic: the first process's key wins, a racing one reads it
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    key = path.read_text().strip().encode()
    if not key:  # an empty HMAC key: anyone could write entries the caches would trust
        raise ValueError(f"{path} is empty, so cache entries could not be sealed: delete it to make a new key "
                         "(or set REWARDKIT_CACHE_SECRET)")
    return key


def seal(secret: bytes, key: str, value: str | bytes) -> str:
    """HMAC-SHA256 of one entry's key and value: only a holder of the secret can write a valid entry."""
    k, v = key.encode(), value if isinstance(value, bytes) else value.encode()
    return hmac.new(secret, b"%d:" % len(k) + k + v, hashlib.sha256).hexdigest()  # length-prefixed


def unsealed(secret: bytes, key: str, value: str | bytes, mac: Any) -> bool:
    """True when ``mac`` does NOT match the entry (altered, or written without the secret). Compared as bytes:
    a planted mac or value that is not ASCII text (or not text: NULL in a table made without NOT NULL) fails
    like any other, it does not raise."""
    m = mac.encode() if isinstance(mac, str) else mac
    if not isinstance(m, bytes) or not isinstance(value, (str, bytes)):
        return True
    return not hmac.compare_digest(seal(secret, key, value).encode(), m)
