"""A hardened JSON-over-HTTP server base (uvicorn, a plain ASGI router) for ``serve-judge`` and ``serve``.

API::

    from rewardkit.http_server import BackgroundServer, HTTPError, JSONRequest, Route, make_app, serve

    async def score(req: JSONRequest) -> dict:        # req.body: parsed JSON (None for GET); req.query
        if "x" not in req.body:
            raise HTTPError(400, "'x' is required")    # -> 400 {"error": {"message": ..., "type": ...}}
        return {"y": req.body["x"]}                    # 200 + JSON, or return (status, dict)

    app = make_app([Route("POST", "/score", score), Route("GET", "/health", health, public=True)],
                   api_key="secret", max_body=1 << 20, max_concurrency=32, request_timeout=60.0, body_timeout=30.0)
    serve(app, "127.0.0.1", 8000)                      # blocks until Ctrl-C
    with BackgroundServer(app, port=0) as srv:         # tests / notebooks: srv.url == "http://127.0.0.1:PORT"
        ...

Handlers may be ``async def`` (run on the event loop) or plain functions (run in a worker thread; a
timed-out thread cannot be interrupted and finishes in the background). Guarantees, in request order:

- the bearer key (``Authorization: Bearer KEY``) is checked from the headers before any body byte is
  read, comparing SHA-256 digests with ``hmac.compare_digest`` (constant time, no length leak): 401;
- ``Content-Length`` above ``max_body``: 413 before reading; malformed (negative, not a number): 400;
  a chunked body is counted as it streams and cut at ``max_body``: 413; early rejections close the
  connection so an unread body is never drained;
- bodies arrive within ``body_timeout`` seconds (408 only then: a body that is still arriving is not
  stalled, and no newer request takes its place); stalled uploads hold no work slot (a slot is taken once
  the body is read) and are bounded by the connection cap below, which closes the oldest connection
  without a complete request first;
- more than ``max_concurrency`` requests at work at once (their bodies read): 503 with ``Retry-After``;
- ``request_timeout`` seconds of work per request once its body has arrived: 504;
- JSON bodies: at most ``max_json_depth`` nested arrays/objects (checked before parsing), no
  ``NaN``/``Infinity``/overflowing numbers, integers of at most 4,300 digits, UTF-8: 400 otherwise;
- connections: at most ``max_connections`` open. A connection is accepted first and counted after: when
  the cap is passed, the server closes the oldest connection that has not delivered a complete request
  (idle, sending headers or sending a body), taken from the client address holding the most such
  connections, so idle sockets cannot starve clients that send requests; only when every connection has a
  request at work does a newcomer get a 503. Complete request headers within ``header_timeout`` seconds of
  connecting (slow-header clients are closed), idle keep-alive connections closed after ``keep_alive``
  seconds, request line and headers at most 16 KiB (431), listen backlog 1024; asyncio serves stalled
  connections without a thread each;
- every error is JSON in OpenAI's shape ``{"error": {"message", "type", "param", "code"}}``, 404/405
  included; a handler crash is a 500 with the exception's message (the traceback goes to the log only).
Binds 127.0.0.1 unless told otherwise; ``require_key_off_loopback`` refuses a keyless server elsewhere.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import hmac
import inspect
import ipaddress
import json
import logging
import math
import re
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import h11
import numpy as np
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("rewardkit.http_server")

MAX_HEADER_BYTES = 16 * 1024
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
               405: "invalid_request_error", 408: "timeout", 413: "invalid_request_error",
               503: "overloaded_error", 504: "timeout"}


class HTTPError(Exception):
    """Raise in a handler to answer ``status`` with a JSON error body."""

    def __init__(self, status: int, message: str, kind: str | None = None):
        super().__init__(message)
        self.status, self.message = status, message
        self.kind = kind or ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")


def error_body(message: str, kind: str) -> dict[str, Any]:
    """OpenAI's error shape."""
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


@dataclass
class JSONRequest:
    """What a handler sees: the parsed JSON body (``None`` without one), query parameters and headers."""

    method: str
    path: str
    body: Any
    query: dict[str, str]
    headers: Headers
    client: str | None = None


Handler = Callable[[JSONRequest], "Awaitable[Any] | Any"]


@dataclass(frozen=True)
class Route:
    """``method path -> handler``; ``public`` routes (health checks) need no key."""

    method: str
    path: str
    handler: Handler
    public: bool = False


@dataclass
class Limits:
    """The request limits of one app (``make_app``'s keyword arguments)."""

    api_key: str | None = None
    max_body: int = 1 << 20
    max_concurrency: int = 64
    request_timeout: float = 60.0
    max_json_depth: int = 64
    public: set[tuple[str, str]] = field(default_factory=set)
    body_timeout: float = 30.0


# ---------------------------------------------------------------------------------------- JSON
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_OPEN = np.zeros(256, dtype=np.int8)
_OPEN[[ord("["), ord("{")]] = 1
_OPEN[[ord("]"), ord("}")]] = -1


def json_depth(raw: bytes) -> int:
    """Deepest nesting of arrays/objects in a JSON text, brackets inside strings ignored (linear time)."""
    stripped = _JSON_STRING.sub(b'""', raw)
    steps = _OPEN[np.frombuffer(stripped, dtype=np.uint8)].astype(np.int64)
    return int(np.cumsum(steps).max(initial=0))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"number {text[:20]} overflows a float")
    return v


def parse_json(raw: bytes, max_depth: int = 64) -> Any:
    """Parse a request body; ``HTTPError(400)`` with the reason for anything that is not plain JSON."""
    if not raw.strip():
        raise HTTPError(400, "the request body is empty; send a JSON object")
    depth = json_depth(raw)
    if depth > max_depth:
        raise HTTPError(400, f"JSON nested {depth} deep; at most {max_depth} levels are accepted")
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_no_constant, parse_float=_finite_float)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise HTTPError(400, f"body is not valid JSON: {str(e)[:200]}") from None


# ---------------------------------------------------------------------------------------- the guard
async def _send_json(send: Callable, status: int, body: dict[str, Any], close: bool = False,
                     extra: Sequence[tuple[bytes, bytes]] = ()) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), *extra]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


class _Gone(Exception):
    """The client disconnected before its body arrived: nothing to answer."""


class _Reject(Exception):
    def __init__(self, status: int, message: str):
        self.status, self.message = status, message


class _Guard:
    """Pure ASGI middleware: key, body size and time, concurrency and work time limits around the routed app."""

    def __init__(self, app: Callable, limits: Limits):
        self.app, self.limits = app, limits
        self.active = 0  # requests at work (body read)
        self._key_digest = (hashlib.sha256(f"Bearer {limits.api_key}".encode()).digest()
                            if limits.api_key else None)

    def _authorised(self, headers: Headers) -> bool:
        if self._key_digest is None:
            return True
        given = headers.get("authorization", "").encode("utf-8", "surrogateescape")
        return hmac.compare_digest(hashlib.sha256(given).digest(), self._key_digest)

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":  # lifespan; websockets are not served
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return
        lim = self.limits
        size = sum(len(k) + len(v) + 4 for k, v in scope["headers"]) + len(scope.get("raw_path") or b"")
        if size > MAX_HEADER_BYTES:  # h11 bounds headers that arrive in pieces; this bounds one-packet ones
            return await _send_json(send, 431, error_body(
                f"request headers of {size} bytes exceed {MAX_HEADER_BYTES}", "invalid_request_error"), close=True)
        headers = Headers(scope=scope)
        path = scope["path"].rstrip("/") or "/"
        if (scope["method"], path) not in lim.public and not self._authorised(headers):
            return await _send_json(send, 401, error_body("invalid or missing API key (Authorization: Bearer KEY)",
                                                          "authentication_error"), close=True)
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit() or not length.isascii():
                return await _send_json(send, 400, error_body(f"malformed Content-Length {length[:40]!r}",
                                                              "invalid_request_error"), close=True)
            if int(length) > lim.max_body:
                return await _send_json(send, 413, error_body(
                    f"body of {int(length)} bytes exceeds the limit of {lim.max_body}", "invalid_request_error"),
                    close=True)
        if self.active >= lim.max_concurrency:  # busy: say so before any body byte is read
            return await _send_json(send, 503, error_body(
                f"server busy: {lim.max_concurrency} requests in progress; retry later", "overloaded_error"),
                close=length is not None and length != "0", extra=[(b"retry-after", b"1")])
        try:
            body = await self._receive_body(receive)
        except _Reject as e:
            return await _send_json(send, e.status, error_body(e.message, ERROR_TYPES[e.status]), close=True)
        except _Gone:
            return
        if self.active >= lim.max_concurrency:  # the body is read: a 503 leaves the connection usable
            return await _send_json(send, 503, error_body(
                f"server busy: {lim.max_concurrency} requests in progress; retry later", "overloaded_error"),
                extra=[(b"retry-after", b"1")])
        self.active += 1
        started = False

        async def send_tracked(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await _within(lim.request_timeout, self.app(scope, _replay(body, receive), send_tracked))
        except (asyncio.TimeoutError, TimeoutError):
            if not started:
                await _send_json(send, 504, error_body(f"the request did not finish within {lim.request_timeout:g}s",
                                                       "timeout"), close=True)
        except Exception as e:  # not from a handler (those are caught in the endpoint): still JSON, never a drop
            log.exception("%s %s failed", scope["method"], path)
            if not started:
                await _send_json(send, 500, error_body(f"{type(e).__name__}: {e}", "server_error"), close=True)
        finally:
            self.active -= 1

    async def _receive_body(self, receive: Callable) -> bytes:
        """The whole body within ``body_timeout`` (408 past it); a body still arriving is never evicted."""
        try:
            return await asyncio.wait_for(self._read_body(receive), self.limits.body_timeout)
        except (asyncio.TimeoutError, TimeoutError):
            raise _Reject(408, f"the request body did not arrive within {self.limits.body_timeout:g}s") from None

    async def _read_body(self, receive: Callable) -> bytes:
        chunks, size = [], 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                raise _Gone
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > self.limits.max_body:
                raise _Reject(413, f"body exceeds the limit of {self.limits.max_body} bytes")
            chunks.append(chunk)
            if not msg.get("more_body", False):
                return b"".join(chunks)


def _replay(body: bytes, receive: Callable) -> Callable:
    sent = False

    async def replay() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


# ---------------------------------------------------------------------------------------- the app
class _Router:
    """``(method, path)`` -> a JSON route; 404/405 as JSON. A plain ASGI app, not a framework's middleware
    stack: with thousands of reward requests in flight, Starlette's layers took ~40% of the server's time."""

    def __init__(self, routes: Sequence[Route], limits: Limits):
        self.limits = limits
        self.table: dict[str, dict[str, tuple[Route, bool]]] = {}
        for r in routes:
            self.table.setdefault(r.path, {})[r.method] = (r, inspect.iscoroutinefunction(r.handler))

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"]
        methods = self.table.get(path.rstrip("/") or "/")
        if methods is None:
            return await _send_json(send, 404, error_body(f"no route {method} {path}", ERROR_TYPES[404]))
        found = methods.get(method) or (methods.get("GET") if method == "HEAD" else None)
        if found is None:
            return await _send_json(send, 405, error_body(f"no route {method} {path}", ERROR_TYPES[405]),
                                    extra=[(b"allow", ", ".join(sorted(methods)).encode())])
        route, is_async = found
        chunks = []
        while True:  # the guard has read the body already: this replays it
            msg = await receive()
            chunks.append(msg.get("body", b""))
            if not msg.get("more_body", False):
                break
        raw = b"".join(chunks)
        try:
            body = parse_json(raw, self.limits.max_json_depth) if raw or method != "GET" else None
            client = scope.get("client")
            req = JSONRequest(method, path, body, dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"),
                                                                 keep_blank_values=True)),
                              Headers(scope=scope), client[0] if client else None)
            out = await route.handler(req) if is_async else await run_in_threadpool(route.handler, req)
            status, payload = out if isinstance(out, tuple) else (200, out)
            data = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
        except HTTPError as e:
            return await _send_json(send, e.status, error_body(e.message, e.kind))
        except Exception as e:  # a crash is a 500 with its message; the traceback stays in the log
            log.exception("%s %s failed", method, path)
            return await _send_json(send, 500, error_body(f"{type(e).__name__}: {e}", "server_error"))
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})


def make_app(routes: Sequence[Route], *, api_key: str | None = None, max_body: int = 1 << 20,
             max_concurrency: int = 64, request_timeout: float = 60.0, max_json_depth: int = 64,
             body_timeout: float = 30.0) -> _Guard:
    """An ASGI app serving ``routes`` behind the key, body, concurrency, time and JSON limits."""
    if (max_body < 1 or max_concurrency < 1 or not request_timeout > 0 or max_json_depth < 1
            or not body_timeout > 0 or math.isinf(request_timeout) or math.isinf(body_timeout)):
        raise ValueError("make_app: max_body, max_concurrency, request_timeout, body_timeout and max_json_depth "
                         "must be positive and finite")
    norm = [Route(r.method.upper(), r.path.rstrip("/") or "/", r.handler, r.public) for r in routes]
    limits = Limits(api_key or None, max_body, max_concurrency, request_timeout, max_json_depth,
                    {(r.method, r.path) for r in norm if r.public}, body_timeout)
    return _Guard(_Router(norm, limits), limits)


# ---------------------------------------------------------------------------------------- serving
class _Unproven:
    """A server's connections that have not delivered a complete request, per client address, oldest first."""

    def __init__(self) -> None:
        self.by_host: dict[str, dict[H11Protocol, None]] = {}
        self.open: set[H11Protocol] = set()  # connections not yet closed by us
        self.said: set[int] = set()  # statuses of connection-level refusals already logged (once each)

    def add(self, proto: H11Protocol) -> None:
        self.by_host.setdefault(proto.client[0] if proto.client else "?", {})[proto] = None

    def discard(self, proto: H11Protocol) -> None:
        host = proto.client[0] if proto.client else "?"
        conns = self.by_host.get(host)
        if conns is not None:
            conns.pop(proto, None)
            if not conns:
                del self.by_host[host]

    def oldest(self, besides: H11Protocol) -> H11Protocol | None:
        """The oldest unproven connection of the address holding the most of them (never ``besides``)."""
        for _, conns in sorted(self.by_host.items(), key=lambda kv: -len(kv[1])):
            victim = next((c for c in conns if c is not besides), None)
            if victim is not None:
                return victim
        return None


def _protocol(header_timeout: float, max_connections: int) -> type[H11Protocol]:
    """uvicorn's h11 protocol plus a header deadline, a connection cap that evicts unproven connections
    rather than refuse new ones, and JSON 400s for bad HTTP."""
    unproven = _Unproven()  # shared by this server's connections

    class GuardedH11(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            unproven.open.add(self)
            unproven.add(self)
            if len(unproven.open) > max_connections:  # accepted, then counted: make room if we can
                victim = unproven.oldest(besides=self)
                if victim is None:  # every other connection has a request at work
                    self._raw_error(503, f"too many open connections (limit {max_connections}), all busy")
                    return
                victim._close()
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._track()
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self._arm()  # waiting for (the rest of) a request's headers
            elif self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._track()  # idle on keep-alive: unproven again until its next request arrives

        def connection_lost(self, exc: Exception | None) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
            unproven.open.discard(self)
            unproven.discard(self)
            super().connection_lost(exc)

        def _track(self) -> None:
            """Unproven while no complete request is at work: idle, or its headers or body still arriving."""
            busy = self.conn.their_state not in (h11.IDLE, h11.SEND_BODY) or self.conn.our_state not in (
                h11.IDLE, h11.SEND_RESPONSE)
            if busy or self.transport.is_closing():
                unproven.discard(self)
            elif self not in unproven.by_host.get(self.client[0] if self.client else "?", {}):
                unproven.add(self)

        def _close(self) -> None:
            unproven.open.discard(self)
            unproven.discard(self)
            self.transport.close()

        def _arm(self) -> None:
            if self._header_timer is None:  # armed once per request: trickling bytes does not extend it
                self._header_timer = self.loop.call_later(header_timeout, self._headers_too_slow)

        def _headers_too_slow(self) -> None:
            self._header_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self._close()  # no request to answer: a client that never finished its headers

        def send_400_response(self, msg: str) -> None:  # h11 rejected the bytes: answer in JSON
            self._raw_error(400, "malformed HTTP request (request line, headers or Content-Length)")

        def _raw_error(self, status: int, message: str) -> None:
            if status not in unproven.said:  # a client may discard the body: the reason goes in the log, once
                unproven.said.add(status)
                log.warning("refused a connection with %d: %s (logged once)", status, message)
            data = json.dumps(error_body(message, ERROR_TYPES.get(status, "invalid_request_error"))).encode()
            reason = {400: b"Bad Request", 503: b"Service Unavailable"}[status]
            self.transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
                                 b"connection: close\r\n\r\n%s" % (status, reason, len(data), data))
            self._close()

    return GuardedH11


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is a loopback address (127.0.0.0/8, ::1; ``localhost``)."""
    try:
        addrs = {info[4][0] for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)}
    except (socket.gaierror, UnicodeError):
        return False
    return bool(addrs) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs)


def require_key_off_loopback(host: str, api_key: str | None, what: str) -> None:
    """``ValueError`` when a server without a key would listen beyond this machine (anyone could use it)."""
    if not api_key and not is_loopback(host):
        raise ValueError(f"{what}: listening on {host} without an API key would let anyone who can reach it use "
                         "it; set a key (--api-key, or its environment variable) or bind 127.0.0.1")


def bind(host: str = "127.0.0.1", port: int = 8000, backlog: int = 1024) -> socket.socket:
    """A listening TCP socket (port 0 picks a free one); an ``OSError`` naming ``host:port`` when it cannot bind."""
    info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(info[0], socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(info[4])
    except OSError as e:
        sock.close()
        hint = " (another process listens there: pick another --port, or 0 for a free one)" if e.errno == errno.EADDRINUSE else ""
        raise OSError(e.errno, f"cannot listen: {e.strerror}{hint}", f"{host}:{port}") from None
    sock.listen(backlog)
    sock.setblocking(False)
    return sock


def _server(app: Any, sock: socket.socket, keep_alive: int, header_timeout: float, max_connections: int,
            backlog: int):
    import uvicorn

    config = uvicorn.Config(app, http=_protocol(header_timeout, max_connections), lifespan="off",
                            log_config=None, log_level="warning", access_log=False, backlog=backlog,
                            timeout_keep_alive=keep_alive, server_header=False, proxy_headers=False)

    class Server(uvicorn.Server):
        async def serve(self, sockets=None) -> None:
            asyncio.get_running_loop().set_exception_handler(_accept_errors_once())
            await super().serve(sockets)

    return Server(config)


async def _within(seconds: float, work: Awaitable[Any]) -> Any:
    """``work`` under a deadline (``TimeoutError`` past it): ``asyncio.timeout`` where Python has it (3.11+: no
    extra task per request, with thousands waiting at once), else ``asyncio.wait_for`` (3.10)."""
    if hasattr(asyncio, "timeout"):
        async with asyncio.timeout(seconds):
            return await work
    return await asyncio.wait_for(work, seconds)


def _accept_errors_once() -> Callable[[Any, dict], None]:
    """An event-loop exception handler that reports a failed ``accept()`` (the open-file limit reached in a
    flood of connections) in one log line, once, where asyncio would print a traceback per attempt; asyncio
    itself retries the accept a second later. Everything else goes to the default handler."""
    said = False

    def handler(loop: Any, context: dict) -> None:
        nonlocal said
        if context.get("message") == "socket.accept() out of system resource":
            if not said:
                said = True
                log.warning("cannot accept connections: %s (the process's open-file limit: `ulimit -n`); "
                            "waiting connections are accepted as others close (logged once)",
                            context.get("exception"))
            return
        loop.default_exception_handler(context)

    return handler


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


def serve(app: Any, host: str = "127.0.0.1", port: int = 8000, *, keep_alive: int = 5,
          header_timeout: float = 5.0, max_connections: int = 1000, backlog: int = 1024,
          on_ready: Callable[[str], None] | None = None) -> None:
    """Serve ``app`` until interrupted (Ctrl-C / SIGTERM); ``on_ready(url)`` once listening."""
    sock = bind(host, port, backlog)
    server = _server(app, sock, keep_alive, header_timeout, max_connections, backlog)
    if on_ready:
        on_ready(url_of(sock))
    server.run(sockets=[sock])


class BackgroundServer:
    """``serve`` in a daemon thread: ``start()`` returns once listening; ``url``; ``stop()``."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, *, keep_alive: int = 5,
                 header_timeout: float = 5.0, max_connections: int = 1000, backlog: int = 1024):
        self.sock = bind(host, port, backlog)
        self.url = url_of(self.sock)
        self.server = _server(app, self.sock, keep_alive, header_timeout, max_connections, backlog)
        self.thread: threading.Thread | None = None

    def start(self, timeout: float = 30.0) -> BackgroundServer:
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       name="rewardkit-http-server", daemon=True)
        self.thread.start()
        end = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > end:
                raise RuntimeError(f"HTTP server at {self.url} did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self.thread is not None:
            self.server.should_exit = True
            self.thread.join(timeout=30)
            self.thread = None
        self.sock.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
