"""A persistent verification cache (sqlite3 in WAL mode: safe with several processes, forks and threads).

Keyed by problem, answer and the pipeline settings (models, k, prompts, checker), so a change of any
setting never returns a stale verdict. Transient failures (timeouts, crashes) are not stored. The file
is created 0600 (folders 0700) and each entry is sealed with an HMAC under ``_sqlite.cache_secret()``:
an entry that does not verify is a miss (counted in ``rejected`` and logged), never a verdict."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from typing import Any

from rewardkit.sqlite_store import cache_secret, connect, private_path, seal, unsealed, write

log = logging.getLogger("rewardkit.cache")


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

    def __init__(self, path: str | os.PathLike[str], timeout: float = 30.0, secret: bytes | None = None):
        self.path = str(private_path(path))
        self.timeout = timeout
        self.secret = secret if secret is not None else cache_secret()
        self.hits = self.misses = self.rejected = 0
        with connect(self.path, timeout) as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS verify_v2 (key TEXT PRIMARY KEY, outcome TEXT NOT NULL, "
                "reason TEXT NOT NULL, detail TEXT NOT NULL, created REAL NOT NULL, mac TEXT NOT NULL)"
            )

    @staticmethod
    def _sealed_text(outcome: str, reason: str, detail: str) -> str:
        return json.dumps([outcome, reason, detail], ensure_ascii=False)

    def get(self, key: str) -> CacheEntry | None:
        with connect(self.path, self.timeout) as conn:  # bytes: a planted row that is not UTF-8 text fails its check
            row = conn.execute("SELECT CAST(outcome AS BLOB), CAST(reason AS BLOB), CAST(detail AS BLOB), "
                               "CAST(mac AS BLOB) FROM verify_v2 WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        try:
            outcome, reason, detail = (b.decode("utf-8") for b in row[:3])
            intact = not unsealed(self.secret, key, self._sealed_text(outcome, reason, detail), row[3])
        except (AttributeError, UnicodeDecodeError):  # NULL (a table made without NOT NULL) or not UTF-8: planted
            intact = False
        if not intact:
            self.rejected += 1
            self.misses += 1
            log.warning("verification cache %s: entry %s fails its integrity check (altered, or written "
                        "without this cache's secret); ignored", self.path, key[:16])
            return None
        self.hits += 1
        return CacheEntry(outcome, reason, json.loads(detail))

    def put(self, key: str, outcome: str, reason: str, detail: dict[str, Any] | None = None) -> None:
        text = json.dumps(detail or {}, ensure_ascii=False, default=str)
        mac = seal(self.secret, key, self._sealed_text(outcome, reason, text))
        with connect(self.path, self.timeout) as conn:
            write(conn, "INSERT OR REPLACE INTO verify_v2 VALUES (?, ?, ?, ?, ?, ?)",
                  [(key, outcome, reason, text, time.time(), mac)])

    def __len__(self) -> int:
        with connect(self.path, self.timeout) as conn:
            return conn.execute("SELECT COUNT(*) FROM verify_v2").fetchone()[0]

    @property
    def hit_rate(self) -> float:
        n = self.hits + self.misses
        return self.hits / n if n else 0.0
