"""Fork-safe sqlite access shared by the persistent caches (judge cache, verification cache)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
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
        conn.execute("PRAGMA journal_mode=WAL")
        yield conn
    finally:
        conn.close()


def write(conn: sqlite3.Connection, sql: str, rows: list[tuple]) -> None:
    """``executemany`` in one transaction that takes the write lock up front (waits under busy_timeout)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(sql, rows)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
