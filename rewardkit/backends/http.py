"""OpenAI-compatible HTTP backend (vLLM / SGLang / llama.cpp servers, hosted APIs, ``rewardkit serve-judge``).

Async (httpx) with bounded concurrency, optional requests-per-minute and tokens-per-minute limits (a hosted
API's quotas: requests are paced, never sent to be refused), a wall-clock timeout per attempt (a server that
trickles bytes cannot hold a request open), retries with exponential backoff and full jitter on connection
errors, timeouts, 408/409/425/429/500/502/503/504 and garbage bodies (a 429's or 503's ``Retry-After`` is waited
out instead, by every request of the backend, up to ``max_retry_after``), and an overall deadline per batch.
Every request ends in a status: a dropped, slow, 500-ing or garbage-returning server yields ``timeout`` /
``error`` results, never an exception or a hang.

``verdict_probs`` asks for one token with ``logprobs``/``top_logprobs`` and reads the choices' first
tokens from the top list (vLLM's ``continue_final_message`` carries the assistant prefix). A server that
returns no log-probabilities gives a clear ``error`` status.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from rewardkit.backends.base import (
    ChatRequest,
    Completion,
    JudgeBackend,
    VerdictRequest,
    VerdictResult,
    check_choices,
)
from rewardkit.backends.spec import redact, remember, user_part
from rewardkit.options import Options, option
from rewardkit.types import Status

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
DEFAULT_KEY_HOSTS = ("api.openai.com",)
VOLATILE_MODEL_FIELDS = {"created", "permission", "object"}  # vLLM stamps these per request


class _Garbage(Exception):
    """The server answered 200 with a body that is not a chat completion."""


@dataclass
class _Outcome:
    body: dict | None
    status: Status
    error: str | None = None


class Pace:
    """A per-minute quota as a schedule: each reservation of ``amount`` (1 request, or n tokens) may start at
    the returned time, and the next one ``amount * 60 / per_minute`` seconds later, so no minute ever holds
    more than ``per_minute`` (requests or tokens) plus one reservation. ``hold(until)`` moves every later start
    to ``until`` at least (a server's Retry-After). Thread-safe; times are ``time.monotonic()``."""

    def __init__(self, per_minute: float | None = None):
        self.per_minute = per_minute
        self._next = -math.inf
        self._lock = threading.Lock()

    def reserve(self, amount: float, now: float, latest: float = math.inf) -> float:
        """The time a request worth ``amount`` may start (>= now); books the quota it uses, unless that time
        is after ``latest`` (the request will not be sent: nothing booked)."""
        return reserve_together(((self, amount),), now, latest)

    def hold(self, until: float) -> None:
        with self._lock:
            self._next = max(self._next, until)


def reserve_together(bookings: Sequence[tuple[Pace, float]], now: float, latest: float = math.inf) -> float:
    """The first time (>= now) every quota lets one request start, each ``(pace, amount)`` booked at that same
    time, or none booked when it is after ``latest``. Booking each quota at the request's real start keeps
    each schedule true: a request slot booked early while the token quota holds the request would let the
    held requests go out together once the tokens allow, more than the request quota's minute holds."""
    paces = [p for p, _ in bookings]
    for p in paces:  # always in the caller's order (requests, then tokens): no lock-order inversion
        p._lock.acquire()
    try:
        start = max([now] + [p._next for p in paces])
        if start <= latest:
            for p, amount in bookings:
                if p.per_minute:
                    p._next = start + amount * 60.0 / p.per_minute
        return start
    finally:
        for p in reversed(paces):
            p._lock.release()


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait: delta-seconds or an HTTP date (RFC 9110 10.2.3); None
    when absent or unreadable.

    >>> retry_after("2"), retry_after("0.5"), retry_after("soon")
    (2.0, 0.5, None)
    >>> retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0)
    10.0
    """
    if not value:
        return None
    try:
        v = float(value)
        return v if math.isfinite(v) and v >= 0 else None
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def estimated_tokens(body: dict[str, Any]) -> int:
    """What a request counts against a tokens-per-minute quota before it is sent: its message text at ~4
    characters per token, plus the completion tokens it may use (``max_tokens`` x ``n``, as providers book them)."""
    chars = sum(len(m.get("content") or "") if isinstance(m.get("content"), str) else len(json.dumps(m.get("content")))
                for m in body.get("messages", []))
    return math.ceil(chars / 4) + int(body.get("max_tokens") or 0) * int(body.get("n") or 1)


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Exponential backoff with full jitter: uniform in [0, min(cap, base * 2**attempt)]."""
    return rng.uniform(0.0, min(cap, base * (2 ** attempt)))


def run_sync(coro):
    """Run a coroutine to completion from sync code, also when the caller already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as e:  # re-raised in the caller's thread
            box["error"] = e

    t = threading.Thread(target=target, name="rewardkit-http")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


@dataclass(frozen=True)
class HTTPOptions(Options):
    """The HTTP backend's options (keywords of ``HTTPBackend``, or ``http://HOST/v1?timeout=30&retries=3``)."""

    model: str | None = option(None, "model name; default: the first id from GET /v1/models")
    api_key_env: str | None = option(None, "name of an environment variable holding the bearer token for this server")
    concurrency: int = option(16, "requests in flight at once")
    requests_per_minute: float | None = option(None, "most requests started in any minute (a hosted API's RPM quota; None: no limit)")
    tokens_per_minute: float | None = option(None, "most tokens booked in any minute: message characters / 4 + max_tokens x n per request (a TPM quota; None: no limit)")
    timeout: float = option(120.0, "wall-clock seconds per attempt")
    retries: int = option(3, "extra attempts after the first")
    backoff: float = option(0.5, "base seconds of the exponential backoff (with full jitter)")
    max_backoff: float = option(8.0, "cap on one backoff sleep")
    deadline: float | None = option(None, "overall seconds for one generate/verdict_probs call (None: no limit)")
    max_retry_after: float | None = option(300.0, "longest Retry-After waited out; a server asking for more ends "
                                                  "the request at once as an error (None: no cap)")
    top_logprobs: int = option(20, "how many next-token alternatives verdict_probs asks for (OpenAI allows <= 20)")
    seed: int | None = option(None, "seed of the backoff jitter")

    def __post_init__(self) -> None:
        super().__post_init__()
        self._at_least(1, "concurrency", "top_logprobs")
        self._at_least(0, "retries", "backoff", "max_backoff")
        self._at_least(0, "timeout", "deadline", "requests_per_minute", "tokens_per_minute", "max_retry_after",
                       strict=True)
        if self.top_logprobs > 20:
            raise ValueError(f"option 'top_logprobs': must be <= 20 (the OpenAI API's limit), got {self.top_logprobs}")


class HTTPBackend(JudgeBackend):
    """A judge behind an OpenAI-compatible ``/v1/chat/completions`` endpoint at ``base_url`` (the server root
    ending in /v1, e.g. http://127.0.0.1:8000/v1); the other keywords are ``HTTPOptions``.

    ``api_key`` is a bearer token, sent to this server whatever its scheme (you configured it for it); it is
    a constructor argument, never an option, so it stays out of specs, reprs and manifests. Without
    ``api_key``/``api_key_env``, ``$OPENAI_API_KEY`` is sent only to hosts on the allow-list
    (``api.openai.com`` plus ``$REWARDKIT_API_KEY_HOSTS``; see ``key_for``), never to another host.
    """

    Options = HTTPOptions

    def __init__(self, base_url: str, *, api_key: str | None = None, **options: Any):
        o = self.options = HTTPOptions(**options)
        model, api_key_env = o.model, o.api_key_env
        remember(base_url)  # a URL given in Python: its credentials are masked wherever they show
        if not base_url.lower().startswith(("http://", "https://")):
            raise ValueError(f"option 'base_url': expected http(s)://HOST[:PORT]/v1, got {redact(base_url)!r}")
        # credentials in the URL become Basic auth; base_url (in every message and model id) never holds them
        self.base_url, self._auth = _split_credentials(base_url.rstrip("/"))
        self.model = model
        self.api_key = key_for(self.base_url, api_key, api_key_env)
        self._rng = random.Random(o.seed)
        self._requests, self._tokens = Pace(o.requests_per_minute), Pace(o.tokens_per_minute)  # across calls
        self.model_id = f"http:{model or '?'}@{self.base_url}"

    # ------------------------------------------------------------------------------ public calls
    def generate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        bodies = [self._chat_body(r) for r in requests]
        outs = run_sync(self._run_all(bodies))
        return [self._completion(r, o) for r, o in zip(requests, outs, strict=True)]

    def verdict_probs(self, requests: Sequence[VerdictRequest]) -> list[VerdictResult]:
        check_choices(requests)
        bodies = [self._verdict_body(r) for r in requests]
        outs = run_sync(self._run_all(bodies))
        return [self._verdict(r, o) for r, o in zip(requests, outs, strict=True)]

    def models(self) -> list[str]:
        """Model ids the server lists at ``GET /v1/models``."""
        return [m["id"] for m in run_sync(self._models())]

    def cache_identity(self) -> str:
        """What the judge cache keys on: URL, model and the served model's ``/v1/models`` entry.

        The entry carries whatever the server reports about the weights behind the name (vLLM's
        ``root``/``parent``/``max_model_len``, llama.cpp's ``meta``, serve-judge's ``root`` and
        ``system_fingerprint``), so a model swapped behind the same URL and name changes the key; fields
        that change per request (``created``, ``permission``) are left out. Raises when the server does
        not answer or does not list the model (the cache is then bypassed)."""
        entries = run_sync(self._models())
        if self.model is None and entries:
            self._set_model(entries[0]["id"])
        entry = next((e for e in entries if e["id"] == self.model), None)
        if entry is None:
            raise RuntimeError(f"{self.base_url}/models does not list {self.model!r} "
                               f"(it lists {[e['id'] for e in entries][:5]})")
        served = {k: v for k, v in entry.items() if k not in VOLATILE_MODEL_FIELDS}
        return json.dumps({"url": self.base_url, "model": self.model, "served": served},
                          sort_keys=True, default=str)

    def served_name(self) -> str:
        """The upstream's model name when known, else ``judge``: its URL (host, port) stays private."""
        return self.model or "judge"

    def check(self) -> None:
        """Ask ``GET /models`` once (no retries: a wrong URL or a stopped server is found before the first group)
        and make sure it lists the model asked for; without one, take the first listed (as discovery would)."""
        try:
            ids = [m["id"] for m in run_sync(self._models())]
        except Exception as e:
            status = getattr(getattr(e, "response", None), "status_code", None)  # httpx.HTTPStatusError
            raise ValueError(f"judge {self.base_url}: GET {self.base_url}/models failed "
                             f"({f'HTTP {status}' if status else _describe(e)}); is an OpenAI-compatible judge "
                             "server running at that URL?") from None
        if self.model is None and ids:
            self._set_model(ids[0])
        elif self.model not in ids:
            raise ValueError(f"judge {self.base_url}: its /models does not list {self.model!r} "
                             f"(it lists {', '.join(map(repr, ids[:5])) or 'no model'})")

    def _set_model(self, name: str) -> None:
        self.model = name
        self.model_id = f"http:{name}@{self.base_url}"

    # ------------------------------------------------------------------------------ request bodies
    def _chat_body(self, r: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"messages": list(r.messages), "max_tokens": r.max_tokens,
                                "temperature": r.temperature, "top_p": r.top_p, "n": r.n}
        if r.seed is not None:
            body["seed"] = r.seed
        if r.stop:
            body["stop"] = list(r.stop)
        if r.min_tokens:
            body["min_tokens"] = r.min_tokens  # vLLM / SGLang / serve-judge extension
        return body

    def _verdict_body(self, r: VerdictRequest) -> dict[str, Any]:
        messages = list(r.messages)
        body: dict[str, Any] = {"max_tokens": 1, "temperature": 0.0, "n": 1, "logprobs": True,
                                "top_logprobs": self.options.top_logprobs}
        if r.assistant_prefix:
            # vLLM / serve-judge extension: continue the final assistant message instead of a new turn
            messages.append({"role": "assistant", "content": r.assistant_prefix})
            body.update(continue_final_message=True, add_generation_prompt=False)
        body["messages"] = messages
        return body

    # ------------------------------------------------------------------------------ transport
    def _headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h

    async def _models(self) -> list[dict[str, Any]]:
        import httpx

        limit = min(self.options.timeout, 30.0)
        async with httpx.AsyncClient(timeout=limit, headers=self._headers(), auth=self._auth) as client:
            r = await asyncio.wait_for(client.get(f"{self.base_url}/models"), limit)
            r.raise_for_status()
            return _model_entries(r.content)

    async def _run_all(self, bodies: list[dict[str, Any]]) -> list[_Outcome]:
        import httpx

        if not bodies:
            return []
        end = time.monotonic() + self.options.deadline if self.options.deadline else math.inf
        limits = httpx.Limits(max_connections=self.options.concurrency, max_keepalive_connections=self.options.concurrency)
        sem = asyncio.Semaphore(self.options.concurrency)
        async with httpx.AsyncClient(timeout=self.options.timeout, limits=limits, headers=self._headers(),
                                     auth=self._auth) as client:
            if self.model is None:  # discovered with the same retries (a server may still be starting)
                found = await self._with_retries(client, None, end)
                try:
                    if found.body is None:
                        raise RuntimeError(found.error)
                    self._set_model(found.body["data"][0]["id"])
                except Exception as e:  # no model name: every request fails the same clear way
                    msg = f"{self.base_url}/models: cannot discover the model name ({_describe(e)}); pass model="
                    return [_Outcome(None, found.status if found.body is None else Status.ERROR, msg) for _ in bodies]

            async def one(body: dict[str, Any]) -> _Outcome:
                async with sem:
                    return await self._with_retries(client, {**body, "model": self.model}, end,
                                                    estimated_tokens(body))

            tasks = [asyncio.create_task(one(b)) for b in bodies]
            wait = None if end == math.inf else max(end - time.monotonic(), 0) + 1.0
            done, pending = await asyncio.wait(tasks, timeout=wait)
            for t in pending:  # belt and braces: the per-attempt bounds should already have ended them
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        out = []
        for t in tasks:
            if t in done and not t.cancelled() and t.exception() is None:
                out.append(t.result())
            elif t in done and not t.cancelled():
                out.append(_Outcome(None, Status.ERROR, f"{self.base_url}: {_describe(t.exception())}"))
            else:
                out.append(_Outcome(None, Status.TIMEOUT, f"{self.base_url}: overall deadline of {self.options.deadline}s exceeded"))
        return out

    async def _paced(self, tokens: int, end: float) -> bool:
        """Wait for this request's turn under the per-minute quotas (and any Retry-After); False when that
        turn comes after the overall deadline."""
        now = time.monotonic()
        start = reserve_together(((self._requests, 1), (self._tokens, tokens)), now, end)
        if start > end:
            return False
        if start > now:
            await asyncio.sleep(start - now)
        return True

    async def _with_retries(self, client, body: dict[str, Any] | None, end: float, tokens: int = 0) -> _Outcome:
        """POST ``body`` to /chat/completions (``body=None``: GET /models) with timeouts, retries and backoff,
        paced by the quotas; a 429/503 with ``Retry-After`` holds every request of this backend that long."""
        url = f"{self.base_url}/chat/completions" if body is not None else f"{self.base_url}/models"
        last = _Outcome(None, Status.ERROR, "no attempt made")
        wait: float | None = None
        for attempt in range(self.options.retries + 1):
            # a deadline already passed is said as such below, not as a rate limit that cannot be met
            if body is not None and time.monotonic() < end and not await self._paced(tokens, end):
                return _Outcome(None, Status.TIMEOUT, f"{url}: overall deadline of {self.options.deadline}s comes "
                                f"before the request-rate limits let this request start; last: {last.error}")
            left = end - time.monotonic()
            if left <= 0:
                return _Outcome(None, Status.TIMEOUT, f"{url}: overall deadline of {self.options.deadline}s exceeded "
                                f"after {attempt} attempt(s); last: {last.error}")
            limit = min(self.options.timeout, left)
            try:
                call = client.post(url, json=body) if body is not None else client.get(url)
                resp = await asyncio.wait_for(call, limit)
                if resp.status_code == 200:
                    parsed = (_parse_completion(resp.content, body["n"]) if body is not None
                              else {"data": _model_entries(resp.content)})
                    return _Outcome(parsed, Status.OK)
                detail = resp.text[:200].replace("\n", " ")
                last = _Outcome(None, Status.ERROR, f"{url}: HTTP {resp.status_code}: {detail}")
                if resp.status_code not in RETRY_STATUS:
                    return last  # a bad request stays bad: no retry
                wait = retry_after(resp.headers.get("Retry-After")) if resp.status_code in (429, 503) else None
                if wait is not None:
                    last.error += f" (Retry-After {wait:g}s)"
                    cap = self.options.max_retry_after
                    if cap is not None and wait > cap:  # a day's wait is a stalled job, not a retry
                        last.error += f": more than max_retry_after={cap:g}s, not waited out"
                        return last
                    self._requests.hold(time.monotonic() + wait)  # the server is out of quota for everyone
            except (asyncio.TimeoutError, TimeoutError):
                why = (f"overall deadline of {self.options.deadline}s reached" if limit < self.options.timeout
                       else f"no complete response within {limit:.1f}s")
                last = _Outcome(None, Status.TIMEOUT, f"{url}: {why}")
            except _Garbage as e:
                last = _Outcome(None, Status.ERROR, f"{url}: malformed response: {e}")
            except Exception as e:  # connection refused / reset / protocol errors
                kind = Status.TIMEOUT if "Timeout" in type(e).__name__ else Status.ERROR
                last = _Outcome(None, kind, f"{url}: {_describe(e)}")
            if attempt < self.options.retries:
                delay = (wait if wait is not None else
                         backoff_delay(attempt, self.options.backoff, self.options.max_backoff, self._rng))
                wait = None
                await asyncio.sleep(max(0.0, min(delay, end - time.monotonic())))
        tries = self.options.retries + 1
        last.error = f"{last.error} (after {tries} attempt{'s' if tries > 1 else ''})"
        return last

    # ------------------------------------------------------------------------------ results
    def _completion(self, r: ChatRequest, o: _Outcome) -> Completion:
        if o.body is None:
            return Completion([], o.status, error=o.error)
        choices = sorted(o.body["choices"], key=lambda c: c.get("index", 0))
        texts = [c["message"]["content"] or "" for c in choices]
        usage = o.body.get("usage") or {}
        return Completion(texts, Status.OK, usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0,
                          [c.get("finish_reason") or "" for c in choices])

    def _verdict(self, r: VerdictRequest, o: _Outcome) -> VerdictResult:
        if o.body is None:
            return VerdictResult(np.array([]), o.status, error=o.error)
        ptoks = (o.body.get("usage") or {}).get("prompt_tokens") or 0
        try:
            top = o.body["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
            if not isinstance(top, list):
                raise TypeError
        except (KeyError, IndexError, TypeError):
            return VerdictResult(np.array([]), Status.ERROR, ptoks, error=(
                f"{self.base_url}: the server returned no top_logprobs; verdict_probs over HTTP needs a server "
                "that supports logprobs=true/top_logprobs (vLLM, SGLang, OpenAI, rewardkit serve-judge); "
                "use generate + verdict parsing instead"))
        try:
            pairs = [_top_entry(t) for t in top]
        except ValueError as e:
            return VerdictResult(np.array([]), Status.ERROR, ptoks, error=f"{self.base_url}: malformed top_logprobs: {e}")
        lp, err = choice_logprobs(r.choices, pairs)
        if err:
            return VerdictResult(np.array([]), Status.ERROR, ptoks, error=f"{self.base_url}: {err}")
        p = np.exp(lp - lp.max())
        return VerdictResult(p / p.sum(), Status.OK, ptoks)


def choice_logprobs(choices: Sequence[str], top: Sequence[tuple[str, float]]) -> tuple[np.ndarray, str | None]:
    """Log-probability of each choice's first token, read from a top-k list of (token text, logprob).

    A token counts for a choice when its text (leading spaces stripped) is a non-empty prefix of the
    choice and of no other choice; the probabilities of such tokens add up. A choice missing from the
    top-k is less likely than every listed token: it gets probability 0 (an approximation the caller
    can tighten with a larger ``top_logprobs``). No choice in the list at all is an error.
    """
    mass = np.zeros(len(choices))
    finite = [lp for _, lp in top if math.isfinite(lp)]
    shift = max(finite, default=0.0)  # exp(lp - shift) <= 1: no overflow whatever the server sent
    for tok, lp in top:
        t = tok.lstrip()
        if not t or not math.isfinite(lp):
            continue
        hits = [j for j, c in enumerate(choices) if c.startswith(t)]
        if len(hits) == 1:
            mass[hits[0]] += math.exp(lp - shift)
    if mass.sum() <= 0:
        return mass, (f"none of the choices {list(choices)} is among the top {len(top)} next tokens "
                      f"({[t for t, _ in top[:5]]}...)")
    with np.errstate(divide="ignore"):
        return np.log(mass) + shift, None


def _parse_json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise _Garbage(f"not JSON ({e}): {raw[:80]!r}") from None


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _parse_completion(raw: bytes, n: int) -> dict[str, Any]:
    """The JSON body of a chat completion with the ``n`` choices asked for, checked for every field we read;
    _Garbage otherwise (a server that ignores ``n`` would leave a majority vote silently short of samples)."""
    body = _parse_json(raw)
    if not isinstance(body, dict) or not isinstance(body.get("choices"), list) or not body["choices"]:
        raise _Garbage(f"no 'choices' list: {raw[:80]!r}")
    if len(body["choices"]) != n:
        raise _Garbage(f"{len(body['choices'])} choice(s) for n={n}")
    for c in body["choices"]:
        if not isinstance(c, dict) or not isinstance(c.get("message"), dict):
            raise _Garbage(f"a choice without a 'message': {raw[:80]!r}")
        content = c["message"].get("content")
        if content is not None and not isinstance(content, str):
            raise _Garbage("message content is not a string")
        if "index" in c and not _is_count(c["index"]):
            raise _Garbage(f"choice index {c['index']!r} is not a non-negative integer")
        if c.get("finish_reason") is not None and not isinstance(c["finish_reason"], str):
            raise _Garbage(f"finish_reason {c['finish_reason']!r} is not a string")
    index = [c.get("index", 0) for c in body["choices"]]  # no index: the first, as the sort below reads it
    if sorted(index) != list(range(n)):  # [0, 0]: one sample counted twice, another lost
        raise _Garbage(f"choice indices {index} for n={n}, not each of 0..{n - 1} once")
    usage = body.get("usage")
    if usage is not None and not isinstance(usage, dict):
        raise _Garbage(f"'usage' is {type(usage).__name__}, not an object")
    for name in ("prompt_tokens", "completion_tokens"):
        v = (usage or {}).get(name)
        if v is not None and not _is_count(v):
            raise _Garbage(f"usage.{name} is {v!r}, not a token count")
    return body


def _model_entries(raw: bytes) -> list[dict[str, Any]]:
    """The ``data`` list of a ``/v1/models`` body (each entry with a string ``id``); _Garbage otherwise."""
    body = _parse_json(raw)
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or not data or not all(isinstance(e, dict) and isinstance(e.get("id"), str)
                                                         for e in data):
        raise _Garbage(f"not a model list: {raw[:80]!r}")
    return data


def _top_entry(t: Any) -> tuple[str, float]:
    """``(token, logprob)`` of one top_logprobs entry; a log-probability must be a number <= 0."""
    if not isinstance(t, dict) or not isinstance(t.get("token"), str):
        raise ValueError(f"entry {str(t)[:60]} has no token string")
    lp = t.get("logprob")
    if isinstance(lp, bool) or not isinstance(lp, (int, float)) or math.isnan(lp) or lp > 1e-3:
        raise ValueError(f"log-probability {lp!r} of token {t['token']!r} is not a number <= 0")
    return t["token"], float(lp)


def _split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """(``url`` without its user part, the (user, password) httpx would send as Basic auth for ``url``, or None).

    The user part ends at the authority's last ``@`` (``spec.user_part``, httpx's rule), so a login
    ``me@corp.com`` or a password ``p@ss word`` stays whole; the values are httpx's own ``URL.username`` and
    ``URL.password``. A URL httpx refuses is a ValueError that shows it redacted only (httpx's message may
    quote part of a password)."""
    import httpx

    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        raise ValueError(f"option 'base_url': {redact(url)!r} is not a URL httpx accepts (write '/', '?', '#' and "
                         "control characters in a user name or password percent-encoded: %2F %3F %23)") from None
    span = user_part(url)
    if span is None:
        return url, None
    return url[:span[0]] + url[span[1] + 1:], (parsed.username, parsed.password)


def key_for(base_url: str, api_key: str | None = None, api_key_env: str | None = None) -> str | None:
    """The bearer token to send to ``base_url``: explicit ``api_key``, else ``$api_key_env``, else
    ``$OPENAI_API_KEY`` only where the host is allowed (``api.openai.com`` and ``$REWARDKIT_API_KEY_HOSTS``:
    comma-separated ``host`` / ``host:port`` entries match https only; plain http needs an exact
    ``http://host:port`` entry), else none."""
    if api_key is not None:
        return api_key or None
    if api_key_env:
        value = os.environ.get(api_key_env)
        if not value:
            raise ValueError(f"option 'api_key_env': the environment variable {api_key_env} is not set")
        return value
    env = os.environ.get("OPENAI_API_KEY")
    return env if env and key_host_allowed(base_url) else None


def key_host_allowed(base_url: str) -> bool:
    """Whether ``$OPENAI_API_KEY`` may go to ``base_url`` (see ``key_for``)."""
    u = urlsplit(base_url)
    if u.scheme not in ("http", "https") or not u.hostname:
        return False
    port = u.port or (443 if u.scheme == "https" else 80)
    for entry in [*DEFAULT_KEY_HOSTS, *os.environ.get("REWARDKIT_API_KEY_HOSTS", "").split(",")]:
        entry = entry.strip().lower()
        if not entry:
            continue
        e = urlsplit(entry if "://" in entry else f"https://{entry}")
        e_port = e.port or (443 if e.scheme == "https" else 80)
        if (e.scheme, e.hostname, e_port) == (u.scheme, u.hostname.lower(), port):
            return True
    return False


def _describe(e: BaseException | None) -> str:
    return f"{type(e).__name__}: {e}" if e is not None else "unknown error"
