"""A persistent judge cache: re-scoring the same rollouts with the same judge costs no model calls.

Entries are content-addressed: the key is a SHA-256 of the backend's ``cache_identity()`` (for HTTP
judges the URL, model name and the served model's ``/v1/models`` entry, fetched per call, so a model
swapped behind the same URL misses), the kind of call (generate / verdict / top_logprobs), the exact
messages and every sampling parameter. Values are the ok results only (a timeout or an error is retried
next time). Each entry is sealed with an HMAC of key and value under a secret (``_sqlite.cache_secret``):
an entry that does not verify (altered, or planted by someone without the secret) is ignored, counted in
``JudgeCache.rejected``, logged, and overwritten by the recomputed value. The file is created 0600 in
0700 folders. Storage is one sqlite3 file in WAL mode with a busy timeout, so several processes (trainer
workers, a judge server, an eval run) can read and write it at once; no connection is held between
operations.

Sampled requests without a seed (temperature > 0, seed None) are not cached: they are not reproducible,
and freezing one sample would silently change the estimator they feed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rewardkit.backends.base import (
    ChatRequest,
    Completion,
    JudgeBackend,
    TopLogprobs,
    VerdictRequest,
    VerdictResult,
)
from rewardkit.sqlite_store import cache_secret, connect, private_path, seal, unsealed, write
from rewardkit.types import Status

SCHEMA_VERSION = 2  # 2: sealed entries (table judge_v2), keys on the backend's cache identity
log = logging.getLogger("rewardkit.cache")


def default_cache_path() -> Path:
    """``$REWARDKIT_CACHE/judge_cache.sqlite3`` (``~/.cache/rewardkit`` when unset)."""
    from rewardkit.backends.embedded import cache_root

    return cache_root() / "judge_cache.sqlite3"


def request_key(identity: str, req: ChatRequest | VerdictRequest, top_k: int | None = None) -> str:
    """The content address of one request to one model (``top_k``: a next-token ``top_logprobs`` call)."""
    if top_k is not None:
        body: dict[str, Any] = {"kind": "top_logprobs", "k": top_k, "messages": req.messages,
                                "assistant_prefix": req.assistant_prefix}
    elif isinstance(req, ChatRequest):
        body = {
            "kind": "generate", "messages": req.messages, "max_tokens": req.max_tokens,
            "temperature": float(req.temperature), "top_p": float(req.top_p), "n": req.n, "seed": req.seed,
            "min_tokens": req.min_tokens, "stop": list(req.stop) if req.stop else None,
        }
    else:
        body = {"kind": "verdict", "messages": req.messages, "choices": list(req.choices),
                "assistant_prefix": req.assistant_prefix}
    body.update(v=SCHEMA_VERSION, model=identity)
    blob = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def cacheable(req: ChatRequest | VerdictRequest) -> bool:
    """Deterministic requests only: greedy, or sampled with a seed."""
    return not isinstance(req, ChatRequest) or req.temperature == 0 or req.seed is not None


class JudgeCache:
    """Key -> JSON value store in sqlite3 (WAL), safe with several threads, processes and forks; entries
    sealed with ``secret`` (default ``_sqlite.cache_secret()``)."""

    def __init__(self, path: str | os.PathLike | None = None, timeout: float = 60.0, secret: bytes | None = None):
        self.path = private_path(Path(path) if path else default_cache_path())
        self.timeout = timeout
        self.secret = secret if secret is not None else cache_secret()
        self.rejected = 0  # entries that failed their integrity check
        self._bad: set[str] = set()
        with connect(self.path, timeout) as c:  # create the table now so errors surface at construction
            c.execute("CREATE TABLE IF NOT EXISTS judge_v2 (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
                      "mac TEXT NOT NULL)")

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """The stored values of those keys that are present and verify."""
        out: dict[str, Any] = {}
        keys = list(dict.fromkeys(keys))
        with connect(self.path, self.timeout) as c:
            for i in range(0, len(keys), 500):  # stay under sqlite's bound-parameter limit
                chunk = keys[i:i + 500]
                q = (f"SELECT key, CAST(value AS BLOB), CAST(mac AS BLOB) FROM judge_v2 "  # bytes: a planted
                     f"WHERE key IN ({','.join('?' * len(chunk))})")  # row that is not UTF-8 fails its check
                for k, v, mac in c.execute(q, chunk):
                    if unsealed(self.secret, k, v, mac):
                        self._reject(k)
                    else:
                        out[k] = json.loads(v)
        return out

    def _reject(self, key: str) -> None:
        self.rejected += 1
        if key not in self._bad:
            log.warning("judge cache %s: entry %s fails its integrity check (altered, or written without this "
                        "cache's secret); ignored and recomputed", self.path, key[:16])
        self._bad.add(key)

    def put_many(self, items: dict[str, Any]) -> None:
        """Store values in one transaction; a verified existing key keeps its first value, a rejected one
        is overwritten."""
        if not items:
            return
        rows = []
        for k, v in items.items():
            text = json.dumps(v, ensure_ascii=False)
            rows.append((k, text, seal(self.secret, k, text)))
        verb = {True: "REPLACE", False: "IGNORE"}
        with connect(self.path, self.timeout) as c:
            for bad in (False, True):
                part = [r for r in rows if (r[0] in self._bad) is bad]
                if part:
                    write(c, f"INSERT OR {verb[bad]} INTO judge_v2 (key, value, mac) VALUES (?, ?, ?)", part)
        self._bad -= set(items)

    def __len__(self) -> int:
        with connect(self.path, self.timeout) as c:
            return c.execute("SELECT COUNT(*) FROM judge_v2").fetchone()[0]

    def close(self) -> None:
        """Nothing to release: no connection is held between operations."""


class CachedBackend(JudgeBackend):
    """Any backend behind the judge cache: hits come back with ``cached=True`` and cost no model call."""

    def __init__(self, inner: JudgeBackend, cache: JudgeCache | str | os.PathLike | None = None):
        self.inner = inner
        self.cache = cache if isinstance(cache, JudgeCache) else JudgeCache(cache)
        self.model_id = inner.model_id
        self.default_mode = inner.default_mode
        self.bypassed = 0  # calls run without the cache (model unidentified, cache unreadable or unwritable)

    def __getattr__(self, name: str) -> Any:  # backend-specific extras (e.g. prefix scoring) pass through
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def cache_identity(self) -> str:
        return self.inner.cache_identity()

    def served_name(self) -> str:
        return self.inner.served_name()

    def describe(self) -> str:
        return f"{self.inner.describe()} (behind the judge cache)"

    def check(self) -> None:
        self.inner.check()

    def context_length(self) -> int | None:
        return self.inner.context_length()

    def _identity(self) -> str | None:
        try:
            return self.inner.cache_identity()
        except Exception as e:  # no identity, no cache: never serve a verdict we cannot attribute
            self.bypassed += 1
            log.warning("judge cache bypassed for %s: cannot identify the served model (%s: %s)",
                        self.inner.model_id, type(e).__name__, e)
            return None

    def _run(self, requests, call, to_json, from_json, top_k=None):
        ident = self._identity() if requests else None
        keys = [request_key(ident, r, top_k) if ident is not None and cacheable(r) else None for r in requests]
        hits = self._cached(keys) if ident is not None else {}
        out: list[Any] = [None] * len(requests)
        todo = []
        for i, k in enumerate(keys):
            if k in hits:
                out[i] = from_json(hits[k])
            else:
                todo.append(i)
        if todo:
            fresh = call([requests[i] for i in todo])
            new = {}
            for i, res in zip(todo, fresh, strict=True):
                out[i] = res
                if keys[i] and res.status is Status.OK:
                    new[keys[i]] = to_json(res)
            try:
                self.cache.put_many(new)
            except sqlite3.Error as e:  # the calls are done: their results are returned, only the cache misses them
                self.bypassed += 1
                log.warning("judge cache %s: %d result(s) not stored (%s: %s); returned uncached",
                            self.cache.path, len(new), type(e).__name__, e)
        return out

    def _cached(self, keys: list[str | None]) -> dict[str, Any]:
        """The cache's hits among ``keys``; none (every request to the judge) when the cache cannot be read."""
        try:
            return self.cache.get_many([k for k in keys if k])
        except sqlite3.Error as e:
            self.bypassed += 1
            log.warning("judge cache %s cannot be read (%s: %s); these requests go to the judge",
                        self.cache.path, type(e).__name__, e)
            return {}

    def generate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        return self._run(
            requests, self.inner.generate,
            lambda c: {"texts": c.texts, "prompt_tokens": c.prompt_tokens,
                       "completion_tokens": c.completion_tokens, "finish_reasons": c.finish_reasons},
            lambda d: Completion(d["texts"], Status.OK, d["prompt_tokens"], d["completion_tokens"],
                                 d["finish_reasons"], cached=True),
        )

    def verdict_probs(self, requests: Sequence[VerdictRequest]) -> list[VerdictResult]:
        return self._run(
            requests, self.inner.verdict_probs,
            lambda r: {"probs": [float(p) for p in r.probs], "prompt_tokens": r.prompt_tokens},
            lambda d: VerdictResult(np.asarray(d["probs"], dtype=float), Status.OK, d["prompt_tokens"],
                                    cached=True),
        )

    def score_tokens(self, requests):  # type: ignore[no-untyped-def]
        """Response-token statistics pass straight through (arrays per token: not cached)."""
        return self.inner.score_tokens(requests)

    def top_logprobs(self, requests: Sequence[VerdictRequest], k: int = 20) -> list[TopLogprobs]:
        """The inner backend's next-token alternatives (what serve-judge's logprobs path serves), cached."""
        return self._run(
            requests, lambda reqs: self.inner.top_logprobs(reqs, k),
            lambda r: {"tokens": [[t, float(v)] for t, v in r.tokens], "prompt_tokens": r.prompt_tokens},
            lambda d: TopLogprobs([(str(t), float(v)) for t, v in d["tokens"]], Status.OK, d["prompt_tokens"],
                                  cached=True),
            top_k=k,
        )

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count_tokens(texts)

    def close(self) -> None:
        self.cache.close()
        self.inner.close()
