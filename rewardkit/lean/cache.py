"""A persistent verification cache (sqlite3 in WAL mode: safe with several processes, forks and threads).

Keyed by problem, answer and the pipeline settings (models, k, prompts, checker), so a change of any
setting never returns a stale verdict. Transient failures (timeouts, crashes) are not stored."""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from typing import Any

from rewardkit._sqlite import connect, write


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
        with connect(self.path, timeout) as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS verify (key TEXT PRIMARY KEY, outcome TEXT NOT NULL, "
                "reason TEXT NOT NULL, detail TEXT NOT NULL, created REAL NOT NULL)"
            )

    def get(self, key: str) -> CacheEntry | None:
        with connect(self.path, self.timeout) as conn:
            row = conn.execute("SELECT outcome, reason, detail FROM verify WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return CacheEntry(row[0], row[1], json.loads(row[2]))

    def put(self, key: str, outcome: str, reason: str, detail: dict[str, Any] | None = None) -> None:
        row = (key, outcome, reason, json.dumps(detail or {}, ensure_ascii=False, default=str), time.time())
        with connect(self.path, self.timeout) as conn:
            write(conn, "INSERT OR REPLACE INTO verify VALUES (?, ?, ?, ?, ?)", [row])

    def __len__(self) -> int:
        with connect(self.path, self.timeout) as conn:
            return conn.execute("SELECT COUNT(*) FROM verify").fetchone()[0]

    @property
    def hit_rate(self) -> float:
        n = self.hits + self.misses
        return self.hits / n if n else 0.0
