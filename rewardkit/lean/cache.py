"""A persistent verification cache (sqlite3 in WAL mode: safe with several processes and threads).

Keyed by problem, answer and the pipeline settings (models, k, prompts, checker), so a change of any
setting never returns a stale verdict. Transient failures (timeouts, crashes) are not stored."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from typing import Any


def cache_key(problem: str, answer: str, settings: dict[str, Any]) -> str:
    """sha256 over the problem, the answer and the canonical JSON of the settings."""
    blob = json.dumps([problem, answer, settings], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class CacheEntry:
    outcome: str
    reason: str
    detail: dict[str, Any]


class VerificationCache:
    """``get(key)`` / ``put(key, outcome, reason, detail)``; hits and misses counted per instance."""

    def __init__(self, path: str | os.PathLike[str], timeout: float = 30.0):
        self.path = str(path)
        self.timeout = timeout
        self.hits = self.misses = 0
        self._local = threading.local()
        conn = self._conn()
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS verify (key TEXT PRIMARY KEY, outcome TEXT NOT NULL, "
            "reason TEXT NOT NULL, detail TEXT NOT NULL, created REAL NOT NULL)"
        )
        conn.commit()

    def _conn(self) -> sqlite3.Connection:
        # one connection per thread and per process (a forked child must not reuse the parent's)
        c = getattr(self._local, "conn", None)
        if c is None or getattr(self._local, "pid", None) != os.getpid():
            c = sqlite3.connect(self.path, timeout=self.timeout)
            c.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")
            c.execute("PRAGMA synchronous=NORMAL")
            self._local.conn, self._local.pid = c, os.getpid()
        return c

    def get(self, key: str) -> CacheEntry | None:
        row = self._conn().execute("SELECT outcome, reason, detail FROM verify WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return CacheEntry(row[0], row[1], json.loads(row[2]))

    def put(self, key: str, outcome: str, reason: str, detail: dict[str, Any] | None = None) -> None:
        c = self._conn()
        with c:
            c.execute("INSERT OR REPLACE INTO verify VALUES (?, ?, ?, ?, ?)",
                      (key, outcome, reason, json.dumps(detail or {}, ensure_ascii=False, default=str), time.time()))

    def __len__(self) -> int:
        return self._conn().execute("SELECT COUNT(*) FROM verify").fetchone()[0]

    @property
    def hit_rate(self) -> float:
        n = self.hits + self.misses
        return self.hits / n if n else 0.0
