"""``rewardkit serve-judge``: one judge model shared over an OpenAI-compatible HTTP endpoint.

Serves ``POST /v1/chat/completions`` and ``GET /v1/models`` (plus ``GET /health``) over any
``JudgeBackend``, with the request and response shapes of the OpenAI chat-completions API. Concurrent
requests from many clients are gathered by a micro-batcher (up to ``max_batch`` requests, waiting at most
``batch_wait`` seconds) into one batched backend call, so trainers, eval runs and notebooks share one
loaded judge and its batching.

Next-token log-probabilities (``logprobs: true, top_logprobs: k``) are served for ``max_tokens: 1``
requests (what ``HTTPBackend.verdict_probs`` sends); vLLM's ``continue_final_message`` /
``add_generation_prompt: false`` continue a final assistant message (the verdict prefix, e.g.
``\\boxed{``). Streaming is not supported (400).
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import queue
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rewardkit.backends.base import ChatRequest, JudgeBackend, TopLogprobs, VerdictRequest
from rewardkit.types import Status


class _Batcher:
    """Collects concurrent submissions into batches for one worker thread that calls ``fn(batch)``."""

    def __init__(self, fn: Callable[[list[Any]], list[Any]], max_batch: int, wait: float, name: str):
        self.fn, self.max_batch, self.wait = fn, max_batch, wait
        self.q: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.thread.start()

    def submit(self, item: Any) -> Any:
        fut: cf.Future = cf.Future()
        self.q.put((item, fut))
        return fut.result()

    def _loop(self) -> None:
        while True:
            first = self.q.get()
            if first is None:
                return
            batch = [first]
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
                batch.append(nxt)
            try:
                results = self.fn([item for item, _ in batch])
                if len(results) != len(batch):
                    raise RuntimeError(f"backend returned {len(results)} results for {len(batch)} requests")
                for (_, fut), res in zip(batch, results, strict=True):
                    fut.set_result(res)
            except BaseException as e:  # the handler threads turn this into a 500
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(e)

    def stop(self) -> None:
        self.q.put(None)


class BadRequest(ValueError):
    """A request the OpenAI API would reject with 400."""


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


def parse_chat_request(body: Any) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """Validated ``(messages, params)`` from an OpenAI chat-completions request body."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("'messages' must be a non-empty list")
    messages = []
    for m in msgs:
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "developer"):
            raise BadRequest("each message needs a role of system, developer, user or assistant")
        role = "system" if m["role"] == "developer" else m["role"]
        messages.append({"role": role, "content": _text_content(m.get("content"))})
    if body.get("stream"):
        raise BadRequest("stream=true is not supported by rewardkit serve-judge")

    def num(name: str, default: Any, kind: type, lo: float, hi: float, v: Any = None) -> Any:
        v = body.get(name, default) if v is None else v
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (kind is int and int(v) != v):
            raise BadRequest(f"'{name}' must be a {kind.__name__}")
        if not lo <= v <= hi:
            raise BadRequest(f"'{name}' must be in [{lo}, {hi}]")
        return kind(v)

    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None and (not isinstance(stop, list) or not all(isinstance(s, str) for s in stop)):
        raise BadRequest("'stop' must be a string or a list of strings")
    params = {
        "max_tokens": num("max_tokens", 256, int, 1, 1 << 20, body.get("max_completion_tokens")),
        "temperature": num("temperature", 1.0, float, 0.0, 2.0),  # OpenAI's default is 1
        "top_p": num("top_p", 1.0, float, 0.0, 1.0),
        "n": num("n", 1, int, 1, 128),
        "seed": num("seed", None, int, -(1 << 63), 1 << 63),
        "stop": stop or None,
        "min_tokens": num("min_tokens", 0, int, 0, 1 << 20),
        "logprobs": bool(body.get("logprobs", False)),
        "top_logprobs": num("top_logprobs", 0, int, 0, 20),
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
    """An OpenAI-compatible chat-completions server over one backend (a ThreadingHTTPServer)."""

    def __init__(self, backend: JudgeBackend, host: str = "127.0.0.1", port: int = 8000,
                 model_name: str | None = None, max_batch: int = 32, batch_wait: float = 0.01,
                 api_key: str | None = None):
        self.backend = backend
        self.model_name = model_name or backend.model_id or "judge"
        self.api_key = api_key
        self.created = int(time.time())
        self._gen = _Batcher(backend.generate, max_batch, batch_wait, "serve-judge-generate")
        self._top = _Batcher(self._top_batch, max_batch, batch_wait, "serve-judge-logprobs")
        self.httpd = ThreadingHTTPServer((host, port), self._handler_class())
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def _top_batch(self, items: list[tuple[VerdictRequest, int]]) -> list[TopLogprobs]:
        k = max(k for _, k in items)
        res = self.backend.top_logprobs([r for r, _ in items], k)
        for r, (_, ki) in zip(res, items, strict=True):
            r.tokens = r.tokens[:ki]
        return res

    # ---------------------------------------------------------------------------------- serving
    def start(self) -> JudgeServer:
        """Serve in a background thread (tests, notebooks); ``stop()`` ends it."""
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="serve-judge", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        try:
            self.httpd.serve_forever()
        finally:
            self.stop()

    def stop(self) -> None:
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join()
            self._thread = None
        self.httpd.server_close()
        self._gen.stop()
        self._top.stop()

    def __enter__(self) -> JudgeServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ---------------------------------------------------------------------------------- handlers
    def chat(self, body: Any) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body) for one chat-completions request."""
        try:
            messages, p = parse_chat_request(body)
        except BadRequest as e:
            return 400, _error(str(e), "invalid_request_error")
        if p["logprobs"]:
            prefix = ""
            if p["continue_final_message"]:
                prefix = messages[-1]["content"]
                messages = messages[:-1]
            k = max(p["top_logprobs"], 1)
            res: TopLogprobs = self._top.submit((VerdictRequest(messages, (), prefix), k))
            if res.status is not Status.OK:
                return _status_error(res.status, res.error)
            tok, lp = res.tokens[0]
            entry = {"token": tok, "logprob": lp, "bytes": list(tok.encode()),
                     "top_logprobs": [{"token": t, "logprob": v, "bytes": list(t.encode())}
                                      for t, v in res.tokens[: p["top_logprobs"]]]}
            choices = [{"index": 0, "message": {"role": "assistant", "content": tok},
                        "logprobs": {"content": [entry]}, "finish_reason": "length"}]
            return 200, self._response(choices, res.prompt_tokens, 1)
        req = ChatRequest(messages, p["max_tokens"], p["temperature"], p["top_p"], p["n"], p["seed"], p["stop"],
                          p["min_tokens"])
        c = self._gen.submit(req)
        if c.status is not Status.OK:
            return _status_error(c.status, c.error)
        reasons = c.finish_reasons or ["stop"] * len(c.texts)
        choices = [{"index": i, "message": {"role": "assistant", "content": t}, "logprobs": None,
                    "finish_reason": reasons[i] if i < len(reasons) else "stop"} for i, t in enumerate(c.texts)]
        return 200, self._response(choices, c.prompt_tokens, c.completion_tokens)

    def _response(self, choices: list[dict], prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": self.model_name, "choices": choices,
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens}}

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": self.model_name, "object": "model", "created": self.created,
                                            "owned_by": "rewardkit"}]}

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt: str, *args: Any) -> None:  # quiet: no line per request
                pass

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorised(self) -> bool:
                if server.api_key and self.headers.get("Authorization") != f"Bearer {server.api_key}":
                    self._send(401, _error("invalid or missing API key", "authentication_error"))
                    return False
                return True

            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                path = self.path.split("?")[0].rstrip("/")
                if path == "/health":
                    self._send(200, {"status": "ok"})
                elif path == "/v1/models":
                    if self._authorised():
                        self._send(200, server.models())
                else:
                    self._send(404, _error(f"no route GET {path}", "not_found_error"))

            def do_POST(self) -> None:  # noqa: N802
                path = self.path.split("?")[0].rstrip("/")
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if path != "/v1/chat/completions":
                    self._send(404, _error(f"no route POST {path}", "not_found_error"))
                    return
                if not self._authorised():
                    return
                try:
                    body = json.loads(raw)
                except ValueError as e:
                    self._send(400, _error(f"body is not JSON: {e}", "invalid_request_error"))
                    return
                try:
                    code, out = server.chat(body)
                except Exception as e:  # a backend crash is a 500 with its message, not a dropped socket
                    code, out = 500, _error(f"{type(e).__name__}: {e}", "server_error")
                self._send(code, out)

        return Handler


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _status_error(status: Status, message: str | None) -> tuple[int, dict[str, Any]]:
    if status is Status.TIMEOUT:
        return 504, _error(message or "judge timed out", "timeout")
    if message and "context" in message:
        return 400, _error(message, "invalid_request_error")
    return 500, _error(message or f"judge returned status {status}", "server_error")
