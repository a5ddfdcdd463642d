"""serve-judge under hostile and careless clients: real HTTP requests against a real server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import numpy as np
import pytest

from rewardkit.backends import ChatRequest, JudgeBackend, VerdictRequest
from rewardkit.backends.base import Completion, TopLogprobs, VerdictResult
from rewardkit.backends.cache import CachedBackend
from rewardkit.backends.http import HTTPBackend
from rewardkit.backends.server import JudgeLimits, JudgeServer
from rewardkit.types import Status

MSG = [{"role": "user", "content": "Say hi."}]
KEY = {"Authorization": "Bearer k3y"}


class Echo(JudgeBackend):
    """Echoes the last message; next token 'A' (p=.7) or 'B' (p=.3); counts calls."""

    model_id = "echo@v1"

    def __init__(self, delay: float = 0.0, slow_calls: int | None = None):
        self.delay, self.slow_calls, self.gen_calls, self.top_calls = delay, slow_calls, [], []
        self.slow_done = threading.Event()  # set once the slow calls have returned

    def generate(self, requests):
        self.gen_calls.append(len(requests))
        if self.slow_calls is None or len(self.gen_calls) <= self.slow_calls:
            time.sleep(self.delay)
            if self.slow_calls is not None and len(self.gen_calls) == self.slow_calls:
                self.slow_done.set()
        return [Completion([r.messages[-1]["content"][: r.max_tokens]] * r.n, Status.OK, 3, 2, ["stop"] * r.n)
                for r in requests]

    def verdict_probs(self, requests):
        return [VerdictResult(np.array([0.7, 0.3]), Status.OK, 3) for _ in requests]

    def top_logprobs(self, requests, k=20):
        self.top_calls.append(len(requests))
        return [TopLogprobs([("A", float(np.log(0.7))), ("B", float(np.log(0.3)))][:k], Status.OK, 3)
                for _ in requests]


@pytest.fixture(scope="module")
def srv():
    with JudgeServer(Echo(), port=0, api_key="k3y", max_body=100_000, header_timeout=1.0,
                     limits=JudgeLimits(max_n=4, max_tokens=64, max_messages=8, max_chars=1000)) as s:
        yield s


def _port(srv) -> int:
    return int(srv.url.rsplit(":", 1)[1].split("/")[0])


def _raw(srv, data: bytes) -> socket.socket:
    c = socket.create_connection(("127.0.0.1", _port(srv)), timeout=10)
    c.sendall(data)
    return c


def _status_and_body(c: socket.socket) -> tuple[int, dict]:
    buf = b""
    while True:
        head, sep, rest = buf.partition(b"\r\n\r\n")
        if sep:
            n = next(int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
            if len(rest) >= n:
                return int(head.split(b" ")[1]), json.loads(rest[:n])
        chunk = c.recv(65536)
        assert chunk, f"connection closed without a complete response: {buf[:200]!r}"
        buf += chunk


def _post(srv, body, headers=KEY) -> httpx.Response:
    return httpx.post(srv.url + "/chat/completions", json=body, headers=headers, timeout=10)


def test_unauthenticated_big_body_is_rejected_before_it_is_read(srv):
    c = _raw(srv, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 524288000\r\n\r\n")
    status, body = _status_and_body(c)  # answered although 500 MiB of body were announced and none sent
    assert status == 401 and body["error"]["type"] == "authentication_error"
    c.close()


def test_oversized_body_is_rejected_without_reading_it(srv):
    c = _raw(srv, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k3y\r\n"
             b"Content-Length: 524288000\r\n\r\n" + b"{" * 1000)
    status, body = _status_and_body(c)
    assert status == 413 and "100000" in body["error"]["message"]
    c.close()


@pytest.mark.parametrize("length", [b"-1", b"ten", b"0x10"])
def test_bad_content_length_is_a_json_400(srv, length):
    c = _raw(srv, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k3y\r\n"
             b"Content-Length: " + length + b"\r\n\r\n{}")
    status, body = _status_and_body(c)
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    c.close()


def test_deep_json_is_a_400(srv):
    r = httpx.post(srv.url + "/chat/completions", content=b"[" * 50_000 + b"]" * 50_000, headers=KEY, timeout=10)
    assert r.status_code == 400 and "nested" in r.json()["error"]["message"]
    deep = {"messages": MSG}
    for _ in range(100):
        deep = {"x": deep}
    assert _post(srv, deep).status_code == 400


def test_bad_keys_are_401_and_health_is_public(srv):
    for h in ({}, {"Authorization": "Bearer k3"}, {"Authorization": "Bearer k3yy"}, {"Authorization": "Basic k3y"}):
        r = _post(srv, {"messages": MSG}, h)
        assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
        assert httpx.get(srv.url + "/models", headers=h).status_code == 401
    assert httpx.get(srv.url.removesuffix("/v1") + "/health").json() == {"status": "ok"}
    assert _post(srv, {"messages": MSG}).status_code == 200


@pytest.mark.parametrize("body,why", [
    ({"messages": MSG, "n": 5}, "'n'"),
    ({"messages": MSG, "max_tokens": 65}, "'max_tokens'"),
    ({"messages": MSG, "max_completion_tokens": 1000}, "'max_tokens'"),
    ({"messages": MSG, "min_tokens": 100}, "'min_tokens'"),
    ({"messages": MSG * 9}, "at most 8"),
    ({"messages": [{"role": "user", "content": "x" * 1001}]}, "at most 1000"),
    ({"messages": MSG, "stop": ["s"] * 17}, "'stop'"),
    ({"messages": MSG, "top_logprobs": 21, "logprobs": True, "max_tokens": 1}, "'top_logprobs'"),
    ({"messages": MSG, "n": "2"}, "'n'"),
    ({"messages": "hi"}, "'messages'"),
    ([1, 2], "JSON object"),
])
def test_per_request_work_limits(srv, body, why):
    r = _post(srv, body)
    assert r.status_code == 400 and why in r.json()["error"]["message"]


def test_stalled_connections_do_not_take_threads_and_are_closed(srv):
    before = threading.active_count()
    socks = []
    for i in range(150):  # bounded loop: 150 clients that connect and then stall
        c = socket.create_connection(("127.0.0.1", _port(srv)), timeout=5)
        if i % 3 == 0:
            c.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nContent-")
        socks.append(c)
    assert threading.active_count() <= before + 2
    # served meanwhile: the stalled ones hold no worker
    assert _post(srv, {"messages": MSG, "max_tokens": 3}).json()["choices"][0]["message"]["content"] == "Say"
    for c in socks:  # each is closed by the server after its header deadline (1 s here)
        c.settimeout(5)
        try:
            assert c.recv(100) == b""
        except ConnectionResetError:
            pass
        c.close()


def test_timed_out_requests_are_504_and_leave_the_queue():
    backend = Echo(delay=1.0, slow_calls=1)  # the first call holds the only batch slot past the 0.3 s deadline
    with JudgeServer(backend, port=0, max_batch=1, batch_wait=0.0, request_timeout=0.3) as s:
        out: list[int] = []
        ts = [threading.Thread(target=lambda: out.append(_post(s, {"messages": MSG}, {}).status_code))
              for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert out == [504] * 4
        assert backend.slow_done.wait(30)
        # a later request runs after everything queued before it (max_batch=1, first come first served): once it
        # is answered, any timed-out request still in the queue would have run (instantly: only call 1 is slow)
        assert _post(s, {"messages": MSG}, {}).status_code == 200
    assert backend.gen_calls == [1, 1]  # the slow call and the last one: the three queued 504s never ran


def test_verdict_logits_through_serve_judge_with_the_cache(tmp_path):
    """`serve-judge --cache` used to answer every logprobs request with a 500 (issue 12)."""
    inner = Echo()
    with JudgeServer(CachedBackend(inner, tmp_path / "c.sqlite3"), port=0) as s:
        client = HTTPBackend(s.url, timeout=10, retries=0)
        req = VerdictRequest(MSG, ["A", "B"], "\\boxed{")
        first = client.verdict_probs([req])[0]
        assert first.status is Status.OK, first.error
        np.testing.assert_allclose(first.probs, [0.7, 0.3])
        second = client.verdict_probs([req])[0]
        np.testing.assert_allclose(second.probs, [0.7, 0.3])
        assert inner.top_calls == [1]  # the second request was served from the cache
        [c] = client.generate([ChatRequest(MSG, max_tokens=3)])
        assert c.texts == ["Say"]


@pytest.mark.parametrize("content", [b'"a\\ud800b"', b'[{"type": "text", "text": "\\udfff"}]'])
def test_a_lone_surrogate_in_a_message_is_a_400_with_the_reason(srv, content):
    # before: it reached the backend, whose tokenizer raised: an HTTP 500
    body = b'{"messages": [{"role": "system", "content": "ok"}, {"role": "user", "content": ' + content + b"}]}"
    r = httpx.post(srv.url + "/chat/completions", content=body, headers=KEY, timeout=10)
    assert r.status_code == 400, r.text
    assert "message 1: content is not valid Unicode text (a lone surrogate at character" in r.json()["error"]["message"]


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1"])
def test_a_keyless_judge_may_not_listen_beyond_loopback(host):
    with pytest.raises(ValueError, match=f"listening on {host} without an API key"):
        JudgeServer(Echo(), host=host, port=0)
    JudgeServer(Echo(), host=host, port=0, api_key="k").stop()  # with a key it may (not started here)
    JudgeServer(Echo(), host="localhost", port=0).stop()


def test_serve_judge_cli_refuses_a_keyless_public_bind_before_loading_the_model(monkeypatch):
    from rewardkit.cli.app import app
    from typer.testing import CliRunner

    monkeypatch.delenv("REWARDKIT_JUDGE_API_KEY", raising=False)
    r = CliRunner().invoke(app, ["serve-judge", "smollm2", "--host", "0.0.0.0", "--port", "0"])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
    assert r.stderr.startswith("error: serve-judge: listening on 0.0.0.0 without an API key")


def test_a_burst_of_500_clients_gets_no_408_for_bodies_sent_with_their_headers():
    """The probe's setting: 500 clients at once against serve-judge's defaults, each request (headers and a
    ~100-byte body) in one write. Before: hundreds of 408 "body still arriving ... send it faster"."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from server_flood import one_write_burst, post_request

    body = json.dumps({"messages": [{"role": "user", "content": "Say hi, judge."}], "max_tokens": 4}).encode()
    assert 60 < len(body) < 120
    with JudgeServer(Echo(), port=0, max_connections=1000) as s:
        bursts = [one_write_burst(_port(s), post_request("/v1/chat/completions", body), 500) for _ in range(3)]
    for got in bursts:  # 503 (Retry-After) past the 256 work slots is the designed answer; a 408 is not
        assert "408" not in got and set(got) <= {"200", "503"} and got.get("200", 0) >= 256, bursts


def test_a_backend_that_loses_a_result_is_a_500_naming_it_and_the_batch_is_not_misrouted():
    """The batcher pairs each waiting request with its result by position; a backend that drops one is refused
    by the backend contract (``JudgeBackend``), so no request gets another's answer."""
    class Lossy(Echo):
        def generate(self, requests):
            return super().generate(requests)[:-1]

    with JudgeServer(Lossy(), port=0) as s:
        r = _post(s, {"messages": MSG}, {})
    assert r.status_code == 500, r.text
    assert "judge backend Lossy.generate returned 0 results for 1 requests" in r.json()["error"]["message"], r.text
