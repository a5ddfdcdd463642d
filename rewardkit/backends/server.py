"""``rewardkit serve-judge``: one judge model shared over an OpenAI-compatible HTTP endpoint.

Serves ``POST /v1/chat/completions`` and ``GET /v1/models`` (plus ``GET /health``, no key needed) over
any ``JudgeBackend`` with the request and response shapes of the OpenAI chat-completions API, on the
hardened base ``rewardkit.http_server`` (key checked before the body is read; body, concurrency, time
and connection limits; a JSON 4xx for every malformed request). Per-request work is bounded as well:
``n``, ``max_tokens``, the number of messages and their total characters (``JudgeLimits``).

Concurrent requests from many clients are gathered by a micro-batcher (up to ``max_batch`` requests,
waiting at most ``batch_wait`` seconds) into one batched backend call, so trainers, eval runs and
notebooks share one loaded judge; a request that times out before its batch starts is dropped from it.

Next-token log-probabilities (``logprobs: true, top_logprobs: k``) are served for ``max_tokens: 1``
requests (what ``HTTPBackend.verdict_probs`` sends); vLLM's ``continue_final_message`` /
``add_generation_prompt: false`` continue a final assistant message (the verdict prefix, e.g.
``\\boxed{``). Streaming is not supported (400).
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import hashlib
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rewardkit.backends.base import ChatRequest, JudgeBackend, TopLogprobs, VerdictRequest
from rewardkit.http_server import (
    BackgroundServer,
    HTTPError,
    JSONRequest,
    Route,
    error_body,
    make_app,
    require_key_off_loopback,
)
from rewardkit.http_server import serve as serve_app
from rewardkit.types import Status, lone_surrogate

#: next-token alternatives always computed (OpenAI's maximum), so cached results do not depend on a batch's k
TOP_K = 20


class _Batcher:
    """Collects concurrent submissions into batches for one worker thread that calls ``fn(batch)``."""

    def __init__(self, fn: Callable[[list[Any]], list[Any]], max_batch: int, wait: float, name: str):
        self.fn, self.max_batch, self.wait = fn, max_batch, wait
        self.q: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.thread.start()

    def submit(self, item: Any) -> cf.Future:
        """A future for ``fn``'s result on ``item``; cancelling it before its batch starts drops the item."""
        fut: cf.Future = cf.Future()
        self.q.put((item, fut))
        return fut

    def _take(self, entry: Any, batch: list) -> None:
        if entry[1].set_running_or_notify_cancel():  # False: cancelled while queued (its client gave up)
            batch.append(entry)

    def _loop(self) -> None:
        while True:
            first = self.q.get()
            if first is None:
                return
            batch: list = []
            self._take(first, batch)
            end = time.monotonic() + self.wait
            while len(batch) < self.max_batch:
                left = end - time.monotonic()
                try:
                    nxt = self.q.get(timeout=max(left, 0)) if left > 0 else self.q.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self.q.put(None)
                    break
                self._take(nxt, batch)
            if not batch:
                continue
            try:
                results = self.fn([item for item, _ in batch])  # one per item: JudgeBackend checks it
                for (_, fut), res in zip(batch, results, strict=True):
                    fut.set_result(res)
            except BaseException as e:  # the handlers turn this into a 500
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(e)

    def stop(self) -> None:
        self.q.put(None)


class BadRequest(HTTPError):
    """A request the OpenAI API would reject with 400."""

    def __init__(self, message: str):
        super().__init__(400, message, "invalid_request_error")


@dataclass(frozen=True)
class JudgeLimits:
    """Per-request work limits of serve-judge (each violation is a 400 naming the limit)."""

    max_n: int = 16
    max_tokens: int = 4096
    max_messages: int = 64
    max_chars: int = 200_000  # all message contents together

    def __post_init__(self) -> None:
        for name in ("max_n", "max_tokens", "max_messages", "max_chars"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"option '{name}': must be a positive integer, got {getattr(self, name)!r}")


def _text_content(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
        parts = []
        for p in content:
            if not isinstance(p, dict) or p.get("type") != "text" or not isinstance(p.get("text"), str):
                raise BadRequest("only text content parts are supported")
            parts.append(p["text"])
        return "".join(parts)
    raise BadRequest("message content must be a string or a list of text parts")


def parse_chat_request(body: Any, limits: JudgeLimits = JudgeLimits()) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """Validated ``(messages, params)`` from an OpenAI chat-completions request body."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("'messages' must be a non-empty list")
    if len(msgs) > limits.max_messages:
        raise BadRequest(f"'messages' has {len(msgs)} entries; this server accepts at most {limits.max_messages}")
    messages = []
    for m in msgs:
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "developer"):
            raise BadRequest("each message needs a role of system, developer, user or assistant")
        role = "system" if m["role"] == "developer" else m["role"]
        content = _text_content(m.get("content"))
        if (k := lone_surrogate(content)) is not None:  # a tokenizer would raise on it: a 500 otherwise
            raise BadRequest(f"message {len(messages)}: content is not valid Unicode text (a lone surrogate "
                             f"at character {k})")
        messages.append({"role": role, "content": content})
    chars = sum(len(m["content"]) for m in messages)
    if chars > limits.max_chars:
        raise BadRequest(f"messages hold {chars} characters; this server accepts at most {limits.max_chars}")
    if body.get("stream"):
        raise BadRequest("stream=true is not supported by rewardkit serve-judge")

    def num(name: str, default: Any, kind: type, lo: float, hi: float, v: Any = None) -> Any:
        v = body.get(name, default) if v is None else v
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (kind is int and int(v) != v):
            raise BadRequest(f"'{name}' must be a {kind.__name__}")
        if not lo <= v <= hi:
            raise BadRequest(f"'{name}' must be in [{lo}, {hi}] on this server")
        return kind(v)

    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None and (not isinstance(stop, list) or len(stop) > 16
                             or not all(isinstance(s, str) and len(s) <= 256 and lone_surrogate(s) is None
                                        for s in stop)):
        raise BadRequest("'stop' must be a string or a list of at most 16 strings of at most 256 characters "
                         "of valid Unicode text")
    params = {
        "max_tokens": num("max_tokens", min(256, limits.max_tokens), int, 1, limits.max_tokens,
                          body.get("max_completion_tokens")),
        "temperature": num("temperature", 1.0, float, 0.0, 2.0),  # OpenAI's default is 1
        "top_p": num("top_p", 1.0, float, 0.0, 1.0),
        "n": num("n", 1, int, 1, limits.max_n),
        "seed": num("seed", None, int, -(1 << 63), 1 << 63),
        "stop": stop or None,
        "min_tokens": num("min_tokens", 0, int, 0, limits.max_tokens),
        "logprobs": bool(body.get("logprobs", False)),
        "top_logprobs": num("top_logprobs", 0, int, 0, TOP_K),
        "continue_final_message": bool(body.get("continue_final_message", False)),
    }
    if params["continue_final_message"] and messages[-1]["role"] != "assistant":
        raise BadRequest("continue_final_message needs a final assistant message")
    if params["logprobs"] and (params["max_tokens"] != 1 or params["n"] != 1):
        raise BadRequest("rewardkit serve-judge returns logprobs for max_tokens=1, n=1 requests only")
    if params["continue_final_message"] and not params["logprobs"]:
        raise BadRequest("continue_final_message is supported together with logprobs (max_tokens=1) only")
    return messages, params


class JudgeServer:
    """An OpenAI-compatible chat-completions server over one backend (uvicorn, in a thread or blocking).

    ``max_body`` (bytes), ``body_timeout`` (seconds for a body to arrive), ``max_concurrency`` (requests at
    work), ``request_timeout`` (seconds of work, queueing included) and ``limits`` (per-request work) bound
    what one client can ask for.
    """

    def __init__(self, backend: JudgeBackend, host: str = "127.0.0.1", port: int = 8000,
                 model_name: str | None = None, max_batch: int = 32, batch_wait: float = 0.01,
                 api_key: str | None = None, *, max_body: int = 2 << 20, max_concurrency: int = 256,
                 request_timeout: float = 600.0, limits: JudgeLimits = JudgeLimits(),
                 header_timeout: float = 5.0, max_connections: int = 1000, body_timeout: float = 30.0):
        require_key_off_loopback(host, api_key, "serve-judge")
        self.backend = backend
        self.model_name = model_name or backend.served_name() or "judge"  # a name, never an upstream's URL
        # what the HTTP client's cache keys on: changes whenever the served model (id, dtype, ...) changes
        self.fingerprint = "rk-" + hashlib.sha256((backend.model_id or self.model_name).encode()).hexdigest()[:16]
        self.limits = limits
        self.created = int(time.time())
        self._gen = _Batcher(backend.generate, max_batch, batch_wait, "serve-judge-generate")
        self._top = _Batcher(self._top_batch, max_batch, batch_wait, "serve-judge-logprobs")
        self.app = make_app([Route("POST", "/v1/chat/completions", self._chat_route),
                             Route("GET", "/v1/models", self._models_route),
                             Route("GET", "/health", self._health, public=True)],
                            api_key=api_key, max_body=max_body, max_concurrency=max_concurrency,
                            request_timeout=request_timeout, body_timeout=body_timeout)
        self.host, self.port = host, port
        self._net = {"header_timeout": header_timeout, "max_connections": max_connections}
        self._bg: BackgroundServer | None = None

    @property
    def url(self) -> str:
        """``http://HOST:PORT/v1`` once started (the bound port when ``port=0``)."""
        if self._bg is None:
            return f"http://{self.host}:{self.port}/v1"
        return f"{self._bg.url}/v1"

    def _top_batch(self, items: list[tuple[VerdictRequest, int]]) -> list[TopLogprobs]:
        res = self.backend.top_logprobs([r for r, _ in items], TOP_K)
        return [TopLogprobs(r.tokens[:ki], r.status, r.prompt_tokens, r.error)
                for r, (_, ki) in zip(res, items, strict=True)]

    # ---------------------------------------------------------------------------------- serving
    def start(self) -> JudgeServer:
        """Serve in a background thread (tests, notebooks); ``stop()`` ends it."""
        self._bg = BackgroundServer(self.app, self.host, self.port, **self._net).start()
        return self

    def serve_forever(self, on_ready: Callable[[str], None] | None = None) -> None:
        """Serve in this thread until interrupted; ``on_ready(url)`` once listening."""
        try:
            serve_app(self.app, self.host, self.port, **self._net,
                      on_ready=(lambda u: on_ready(f"{u}/v1")) if on_ready else None)
        finally:
            self.stop()

    def stop(self) -> None:
        if self._bg is not None:
            self._bg.stop()
        self._gen.stop()
        self._top.stop()

    def __enter__(self) -> JudgeServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ---------------------------------------------------------------------------------- handlers
    async def _health(self, req: JSONRequest) -> dict[str, Any]:
        return {"status": "ok"}

    async def _models_route(self, req: JSONRequest) -> dict[str, Any]:
        return self.models()

    async def _chat_route(self, req: JSONRequest) -> tuple[int, dict[str, Any]]:
        return await self.chat(req.body)

    @staticmethod
    async def _wait(fut: cf.Future) -> Any:
        try:
            return await asyncio.wrap_future(fut)
        except asyncio.CancelledError:  # the request timed out: drop it from the queue if not yet running
            fut.cancel()
            raise

    async def chat(self, body: Any) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body) for one chat-completions request."""
        messages, p = parse_chat_request(body, self.limits)
        if p["logprobs"]:
            prefix = ""
            if p["continue_final_message"]:
                prefix = messages[-1]["content"]
                messages = messages[:-1]
            k = max(p["top_logprobs"], 1)
            res: TopLogprobs = await self._wait(self._top.submit((VerdictRequest(messages, (), prefix), k)))
            if res.status is not Status.OK:
                return _status_error(res.status, res.error)
            if not res.tokens:
                return 500, error_body("the judge returned no next-token log-probabilities", "server_error")
            tok, lp = res.tokens[0]
            entry = {"token": tok, "logprob": lp, "bytes": list(tok.encode()),
                     "top_logprobs": [{"token": t, "logprob": v, "bytes": list(t.encode())}
                                      for t, v in res.tokens[: p["top_logprobs"]]]}
            choices = [{"index": 0, "message": {"role": "assistant", "content": tok},
                        "logprobs": {"content": [entry]}, "finish_reason": "length"}]
            return 200, self._response(choices, res.prompt_tokens, 1)
        req = ChatRequest(messages, p["max_tokens"], p["temperature"], p["top_p"], p["n"], p["seed"], p["stop"],
                          p["min_tokens"])
        c = await self._wait(self._gen.submit(req))
        if c.status is not Status.OK:
            return _status_error(c.status, c.error)
        reasons = c.finish_reasons or ["stop"] * len(c.texts)
        choices = [{"index": i, "message": {"role": "assistant", "content": t}, "logprobs": None,
                    "finish_reason": reasons[i] if i < len(reasons) else "stop"} for i, t in enumerate(c.texts)]
        return 200, self._response(choices, c.prompt_tokens, c.completion_tokens)

    def _response(self, choices: list[dict], prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": self.model_name, "system_fingerprint": self.fingerprint, "choices": choices,
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens}}

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": self.model_name, "object": "model", "created": self.created,
                                            "owned_by": "rewardkit", "root": self.backend.served_name() or None,
                                            "system_fingerprint": self.fingerprint}]}


def _status_error(status: Status, message: str | None) -> tuple[int, dict[str, Any]]:
    if status is Status.TIMEOUT:
        return 504, error_body(message or "judge timed out", "timeout")
    if message and "context" in message:
        return 400, error_body(message, "invalid_request_error")
    return 500, error_body(message or f"judge returned status {status}", "server_error")
