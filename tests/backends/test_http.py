"""HTTP backend and serve-judge against real HTTP servers on 127.0.0.1.

Misbehaving servers (500s, garbage, slow, trickling, dropped connections) must yield statuses, never an
exception or a hang; ``rewardkit serve-judge`` serving the real embedded model must answer the way the
model answers in-process.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import numpy as np
import pytest

from rewardkit.backends import ChatRequest, JudgeBackend, VerdictRequest, load_backend
from rewardkit.backends.base import Completion, TopLogprobs, VerdictResult
from rewardkit.backends.http import HTTPBackend, backoff_delay, choice_logprobs, key_host_allowed
from rewardkit.backends.server import JudgeServer
from rewardkit.types import Status

ROOT = Path(__file__).resolve().parents[2]
MSG = [{"role": "user", "content": "Say hi."}]


def ok_body(text: str = "hi", logprobs: list | None = None) -> dict:
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop",
              "logprobs": None}
    if logprobs is not None:
        choice["logprobs"] = {"content": [{"token": logprobs[0][0], "logprob": logprobs[0][1], "bytes": None,
                                           "top_logprobs": [{"token": t, "logprob": v, "bytes": None}
                                                            for t, v in logprobs]}]}
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice],
            "usage": {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8}}


class FakeServer:
    """A tiny server whose POST behaviour is a function of the call number; counts calls and concurrency."""

    def __init__(self, behave):
        self.behave, self.calls, self.inflight, self.max_inflight = behave, 0, 0, 0
        self.bodies: list[dict] = []
        self.auth: list[str | None] = []  # the Authorization header of every request
        self.lock = threading.Lock()
        fake = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                fake.auth.append(self.headers.get("Authorization"))
                data = json.dumps({"object": "list", "data": [{"id": "fake-model", "object": "model"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.calls += 1
                    n = fake.calls
                    fake.bodies.append(body)
                    fake.auth.append(self.headers.get("Authorization"))
                    fake.inflight += 1
                    fake.max_inflight = max(fake.max_inflight, fake.inflight)
                try:
                    fake.behave(self, n)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    with fake.lock:
                        fake.inflight -= 1

            def reply(self, code: int, data: bytes):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def fast(url: str, **kw) -> HTTPBackend:
    opts = dict(model="m", timeout=2.0, retries=2, backoff=0.01, max_backoff=0.05, seed=0)
    opts.update(kw)
    return HTTPBackend(url, **opts)


# ----------------------------------------------------------------------------------- well-behaved
def test_generate_ok_with_usage_and_request_shape():
    with FakeServer(lambda h, n: h.reply(200, json.dumps(ok_body("hello")).encode())) as s:
        [c] = fast(s.url).generate([ChatRequest(MSG, max_tokens=5, temperature=0.0, seed=3, stop=["x"])])
    assert (c.status, c.texts, c.prompt_tokens, c.completion_tokens, c.finish_reasons) == \
        (Status.OK, ["hello"], 7, 1, ["stop"])
    sent = s.bodies[0]
    assert sent["model"] == "m" and sent["messages"] == MSG and sent["max_tokens"] == 5
    assert sent["seed"] == 3 and sent["stop"] == ["x"] and sent["n"] == 1


def test_model_name_discovered_from_v1_models():
    with FakeServer(lambda h, n: h.reply(200, json.dumps(ok_body()).encode())) as s:
        b = HTTPBackend(s.url, timeout=2.0)
        assert b.models() == ["fake-model"]
        assert b.generate([ChatRequest(MSG)])[0].status is Status.OK
    assert s.bodies[0]["model"] == "fake-model" and b.model_id.startswith("http:fake-model@")


def test_model_discovery_waits_for_a_server_that_is_still_starting():
    s = FakeServer(lambda h, n: h.reply(200, json.dumps(ok_body("late")).encode()))
    handler = s.httpd.RequestHandlerClass
    s.httpd.server_close()
    # the port stays ours: bound, not listening, so connections are refused until listen() (no other process can
    # take it meanwhile, as it could if it were closed and bound again later)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"

    def start_later():
        time.sleep(0.5)  # the client meets refused connections first
        httpd = ThreadingHTTPServer(sock.getsockname(), handler, bind_and_activate=False)
        httpd.socket.close()
        httpd.socket = sock
        httpd.server_activate()  # listen() on the held socket
        httpd.daemon_threads = True
        s.httpd = httpd
        threading.Thread(target=httpd.serve_forever, daemon=True).start()

    starter = threading.Thread(target=start_later)
    starter.start()
    try:
        [c] = HTTPBackend(url, timeout=2.0, retries=20, backoff=0.05, max_backoff=0.2).generate([ChatRequest(MSG)])
    finally:
        starter.join(30)
        s.httpd.shutdown()
        s.httpd.server_close()
    assert c.status is Status.OK and c.texts == ["late"]
    assert s.bodies[0]["model"] == "fake-model"


def test_model_discovery_failure_names_the_place():
    s = FakeServer(lambda h, n: None)
    url = s.url
    s.httpd.server_close()
    [c] = HTTPBackend(url, timeout=1.0, retries=1, backoff=0.01).generate([ChatRequest(MSG)])
    assert c.status is Status.ERROR and "/v1/models: cannot discover the model name" in c.error


def test_concurrency_is_bounded():
    def slow_ok(h, n):
        time.sleep(0.2)
        h.reply(200, json.dumps(ok_body()).encode())

    with FakeServer(slow_ok) as s:
        out = fast(s.url, concurrency=3).generate([ChatRequest(MSG)] * 9)
    assert all(c.status is Status.OK for c in out)
    assert s.max_inflight <= 3 and s.calls == 9


# ----------------------------------------------------------------------------------- misbehaving
def test_500_retried_then_error_with_message():
    with FakeServer(lambda h, n: h.reply(500, b'{"error": "boom"}')) as s:
        [c] = fast(s.url, retries=2).generate([ChatRequest(MSG)])
    assert c.status is Status.ERROR and "HTTP 500" in c.error and "3 attempts" in c.error
    assert s.calls == 3 and c.texts == []


def test_flaky_server_recovers_by_retrying():
    def flaky(h, n):
        if n <= 2:
            h.reply(503, b"busy")
        else:
            h.reply(200, json.dumps(ok_body("late")).encode())

    with FakeServer(flaky) as s:
        [c] = fast(s.url, retries=3).generate([ChatRequest(MSG)])
    assert c.status is Status.OK and c.text == "late" and s.calls == 3


def test_400_is_not_retried():
    with FakeServer(lambda h, n: h.reply(400, b'{"error": {"message": "bad"}}')) as s:
        [c] = fast(s.url, retries=3).generate([ChatRequest(MSG)])
    assert c.status is Status.ERROR and "HTTP 400" in c.error and s.calls == 1


@pytest.mark.parametrize("payload", [b"<html>oops</html>", b'{"foo": 1}', b'{"choices": []}',
                                     b'{"choices": [{"message": {"content": 5}}]}', b"\xff\xfe"])
def test_garbage_is_an_error_status(payload):
    with FakeServer(lambda h, n: h.reply(200, payload)) as s:
        [c] = fast(s.url, retries=1).generate([ChatRequest(MSG)])
    assert c.status is Status.ERROR and "malformed" in c.error and s.calls == 2


def test_slow_server_times_out():
    def slow(h, n):  # answers correctly, but only after 20 s: a client that waited would get ok
        time.sleep(20)
        try:
            h.reply(200, json.dumps(ok_body()).encode())
        except OSError:
            pass

    with FakeServer(slow) as s:
        [c] = fast(s.url, timeout=0.3, retries=1).generate([ChatRequest(MSG)])
        calls = s.calls
    assert c.status is Status.TIMEOUT and "0.3s" in c.error and "after 2 attempts" in c.error
    assert calls == 2


def test_trickling_server_cannot_hold_a_request():
    """Bytes every 0.1 s keep httpx's read timeout happy; the wall-clock bound per attempt still ends it."""
    def trickle(h, n):
        h.send_response(200)
        h.send_header("Content-Length", "100000")
        h.end_headers()
        for _ in range(40):
            h.wfile.write(b" ")
            h.wfile.flush()
            time.sleep(0.1)

    with FakeServer(trickle) as s:
        [c] = fast(s.url, timeout=0.5, retries=0).generate([ChatRequest(MSG)])
    assert c.status is Status.TIMEOUT


def test_dropped_connection_is_an_error():
    def drop(h, n):
        h.connection.shutdown(socket.SHUT_RDWR)
        h.close_connection = True

    with FakeServer(drop) as s:
        [c] = fast(s.url, retries=1).generate([ChatRequest(MSG)])
    assert c.status is Status.ERROR and s.calls == 2


def test_nothing_listening_is_an_error():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    [c] = fast(f"http://127.0.0.1:{port}/v1", retries=1).generate([ChatRequest(MSG)])
    assert c.status is Status.ERROR and "Connect" in c.error


def test_overall_deadline_bounds_a_batch():
    def slow(h, n):
        time.sleep(1.0)
        try:
            h.reply(200, json.dumps(ok_body()).encode())
        except OSError:
            pass

    with FakeServer(slow) as s:
        out = fast(s.url, timeout=5.0, concurrency=2, deadline=1.5, retries=0).generate([ChatRequest(MSG)] * 8)
    statuses = [c.status for c in out]
    assert statuses.count(Status.OK) == 2  # the first two finish within the deadline
    assert statuses.count(Status.TIMEOUT) == 6 and all("deadline" in c.error for c in out if c.error)


def test_backoff_is_exponential_with_full_jitter():
    import random

    rng = random.Random(0)
    for attempt in range(6):
        caps = min(8.0, 0.5 * 2 ** attempt)
        draws = [backoff_delay(attempt, 0.5, 8.0, rng) for _ in range(200)]
        assert 0 <= min(draws) and max(draws) <= caps and max(draws) > 0.8 * caps


# ----------------------------------------------------------------------------------- verdicts via logprobs
def test_choice_logprobs_maps_tokens_to_choices():
    top = [(" A", np.log(0.5)), ("B", np.log(0.2)), ("T", np.log(0.1)), ("\n", np.log(0.1)), ("Tie", np.log(0.05))]
    lp, err = choice_logprobs(["A", "B", "Tie"], top)
    assert err is None
    np.testing.assert_allclose(np.exp(lp), [0.5, 0.2, 0.15])
    lp, err = choice_logprobs(["YES", "NO"], top)
    assert err and "none of the choices" in err


def test_verdict_probs_over_http():
    top = [(" B", -0.5), ("A", -1.5), ("x", -2.0)]
    with FakeServer(lambda h, n: h.reply(200, json.dumps(ok_body("B", top)).encode())) as s:
        [v] = fast(s.url).verdict_probs([VerdictRequest(MSG, ["A", "B", "Tie"], "\\boxed{")])
    assert v.status is Status.OK and v.prompt_tokens == 7
    np.testing.assert_allclose(v.probs, [np.exp(-1.5), np.exp(-0.5), 0] / (np.exp(-1.5) + np.exp(-0.5)))
    sent = s.bodies[0]
    assert sent["logprobs"] is True and sent["top_logprobs"] == 20 and sent["max_tokens"] == 1
    assert sent["messages"][-1] == {"role": "assistant", "content": "\\boxed{"} and sent["continue_final_message"]


def test_verdict_probs_without_logprobs_is_a_clear_error():
    with FakeServer(lambda h, n: h.reply(200, json.dumps(ok_body("A")).encode())) as s:
        [v] = fast(s.url).verdict_probs([VerdictRequest(MSG, ["A", "B"])])
    assert v.status is Status.ERROR and "top_logprobs" in v.error and v.probs.size == 0


def test_load_backend_http_specs():
    b = load_backend("http://127.0.0.1:9/v1?model=judge", retries=0)
    assert isinstance(b, HTTPBackend) and b.model == "judge" and b.base_url == "http://127.0.0.1:9/v1"
    assert load_backend("http://127.0.0.1:9/v1?model=judge", retries=0) is b
    c = load_backend("openai:gpt-x@https://example.invalid/v1")
    assert isinstance(c, HTTPBackend) and c.model == "gpt-x"


def test_called_from_inside_an_event_loop():
    import asyncio

    async def main():
        with FakeServer(lambda h, n: h.reply(200, json.dumps(ok_body("in-loop")).encode())) as s:
            return fast(s.url).generate([ChatRequest(MSG)])

    assert asyncio.run(main())[0].text == "in-loop"


# ----------------------------------------------------------------------------------- serve-judge protocol
class Echo(JudgeBackend):
    """A test double of a model: echoes the last user message; next token 'A' (p=.7) or 'B' (p=.3)."""

    model_id = "echo"

    def generate(self, requests):
        return [Completion([r.messages[-1]["content"][: r.max_tokens]] * r.n, Status.OK, 3, 2, ["stop"] * r.n)
                for r in requests]

    def verdict_probs(self, requests):
        return [VerdictResult(np.array([0.7, 0.3]), Status.OK, 3) for _ in requests]

    def top_logprobs(self, requests, k=20):
        self.prefixes = [r.assistant_prefix for r in requests]
        return [TopLogprobs([("A", np.log(0.7)), ("B", np.log(0.3))][:k], Status.OK, 3) for _ in requests]


def test_serve_judge_protocol_and_errors():
    with JudgeServer(Echo(), port=0, api_key="k") as srv:
        h = {"Authorization": "Bearer k"}
        with httpx.Client(timeout=5) as cl:
            assert cl.get(srv.url + "/models").status_code == 401
            models = cl.get(srv.url + "/models", headers=h).json()
            assert models["object"] == "list" and models["data"][0]["id"] == "echo"
            r = cl.post(srv.url + "/chat/completions", headers=h,
                        json={"model": "echo", "messages": [{"role": "user", "content": "abc"}], "n": 2})
            body = r.json()
            assert r.status_code == 200 and body["object"] == "chat.completion"
            assert [c["message"]["content"] for c in body["choices"]] == ["abc", "abc"]
            assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
            for bad in ({"messages": []}, {"messages": MSG, "stream": True}, {"messages": MSG, "temperature": 9},
                        {"messages": MSG, "logprobs": True, "max_tokens": 5}, {"messages": [{"role": "x"}]}):
                r = cl.post(srv.url + "/chat/completions", headers=h, json=bad)
                assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
            r = cl.post(srv.url + "/chat/completions", headers=h, content=b"{not json")
            assert r.status_code == 400
            assert cl.post(srv.url + "/nope", headers=h, json={}).status_code == 404
        # the HTTP backend's verdict requests round-trip through the server's logprobs path
        b = HTTPBackend(srv.url, api_key="k", timeout=5)
        [v] = b.verdict_probs([VerdictRequest(MSG, ["A", "B"], "\\boxed{")])
        np.testing.assert_allclose(v.probs, [0.7, 0.3])
        assert srv.backend.prefixes == ["\\boxed{"]


def test_serve_judge_batches_concurrent_clients():
    calls = []

    class Counting(Echo):
        def generate(self, requests):
            calls.append(len(requests))
            time.sleep(0.05)
            return super().generate(requests)

    with JudgeServer(Counting(), port=0, max_batch=16, batch_wait=0.2) as srv:
        out = HTTPBackend(srv.url, concurrency=12, timeout=10).generate(
            [ChatRequest([{"role": "user", "content": f"q{i}"}]) for i in range(12)])
    assert [c.text for c in out] == [f"q{i}" for i in range(12)]
    assert sum(calls) == 12 and len(calls) < 12  # gathered into fewer backend calls than requests


# ----------------------------------------------------------------------------------- the real model
@pytest.mark.model
def test_serve_judge_cli_serves_the_embedded_model(judge_backend):
    """`serve-judge smollm2` in its own process answers exactly as the model does in-process."""
    code = ("import sys, typer; sys.path.insert(0, sys.argv[1]); from cli.serve_judge import serve_judge; "
            "sys.argv = sys.argv[1:]; typer.run(serve_judge)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-u", "-c", code, str(ROOT), "smollm2", "--port", "0", "--dtype", "float32"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        url, seen = None, []
        t0 = time.monotonic()
        while url is None and time.monotonic() - t0 < 300:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            m = re.search(r"at (http://\S+/v1)", line)
            url = m.group(1) if m else None
        assert url, f"serve-judge did not start: {''.join(seen)[-2000:]}"
        b = HTTPBackend(url, timeout=120)
        reqs = [ChatRequest([{"role": "user", "content": q}], max_tokens=8, temperature=0.0)
                for q in ("What is 2+2?", "Name a colour.")]
        remote, local = b.generate(reqs), judge_backend.generate(reqs)
        assert [c.status for c in remote] == [Status.OK] * 2
        assert [c.texts for c in remote] == [c.texts for c in local]
        assert [c.prompt_tokens for c in remote] == [c.prompt_tokens for c in local]

        vmsg = [{"role": "user", "content": "Which is better, answer A or answer B? Reply with one letter."}]
        [top] = judge_backend.top_logprobs([VerdictRequest(vmsg, (), "The better answer is ")], 20)
        firsts, choices = set(), []
        for tok, _ in top.tokens:  # two of the model's own likely tokens as the "verdicts"
            t = tok.strip()
            if t and t[0] not in firsts and t.isalnum():
                firsts.add(t[0])
                choices.append(t)
        vreq = VerdictRequest(vmsg, choices[:2], "The better answer is ")
        [rv], [lv] = b.verdict_probs([vreq]), judge_backend.verdict_probs([vreq])
        assert rv.status is Status.OK, rv.error
        np.testing.assert_allclose(rv.probs, lv.probs, atol=1e-4)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_serve_judge_backend_crash_is_a_500_and_an_error_status():
    class Crashing(Echo):
        def generate(self, requests):
            raise RuntimeError("model fell over")

    with JudgeServer(Crashing(), port=0) as srv:
        r = httpx.post(srv.url + "/chat/completions", json={"messages": MSG}, timeout=5)
        assert r.status_code == 500 and "model fell over" in r.json()["error"]["message"]
        [c] = fast(srv.url, retries=1).generate([ChatRequest(MSG)])
    assert c.status is Status.ERROR and "HTTP 500" in c.error and "model fell over" in c.error


# ----------------------------------------------------------------------------------- odd 200 responses
def _odd(mutate) -> dict:
    body = ok_body("hi", [("A", -0.1), ("B", -2.5)])
    mutate(body)
    return body


@pytest.mark.parametrize("mutate,why", [
    (lambda b: b["usage"].update(prompt_tokens="many"), "usage.prompt_tokens is 'many'"),
    (lambda b: b["usage"].update(completion_tokens=[1]), "usage.completion_tokens is [1]"),
    (lambda b: b.update(usage=[7, 1]), "'usage' is list"),
    (lambda b: b["usage"].update(prompt_tokens=-3), "usage.prompt_tokens is -3"),
    (lambda b: b["choices"][0].update(index="0"), "choice index '0'"),
    (lambda b: b["choices"][0].update(index=0.5), "choice index 0.5"),
    (lambda b: b["choices"][0].update(finish_reason=["stop"]), "finish_reason"),
])
def test_odd_200_bodies_are_error_statuses_not_crashes(mutate, why):
    """Each of these used to raise out of generate/verdict_probs and kill the whole job (issue 12)."""
    with FakeServer(lambda h, n: h.reply(200, json.dumps(_odd(mutate)).encode())) as s:
        b = fast(s.url, retries=1)
        [c] = b.generate([ChatRequest(MSG)])
        [v] = b.verdict_probs([VerdictRequest(MSG, ["A", "B"])])
    for r in (c, v):
        assert r.status is Status.ERROR and "malformed response" in r.error and why in r.error, r.error
    assert s.calls == 4  # malformed bodies are retried like other garbage


@pytest.mark.parametrize("logprob,why", [(710.0, "710.0"), (1e308, "1e+308"), ("-0.1", "'-0.1'"), (True, "True")])
def test_impossible_log_probabilities_are_an_error_status(logprob, why):
    def mutate(b):
        b["choices"][0]["logprobs"]["content"][0]["top_logprobs"][0]["logprob"] = logprob

    with FakeServer(lambda h, n: h.reply(200, json.dumps(_odd(mutate)).encode())) as s:
        [v] = fast(s.url).verdict_probs([VerdictRequest(MSG, ["A", "B"])])
    assert v.status is Status.ERROR and "malformed top_logprobs" in v.error and why in v.error
    assert v.probs.size == 0


def test_choice_logprobs_cannot_overflow():
    lp, err = choice_logprobs(["A", "B"], [("A", 800.0), ("B", 799.0)])
    assert err is None and np.isfinite(lp).all()
    np.testing.assert_allclose(np.exp(lp - lp.max()), [1.0, np.exp(-1.0)])


# ----------------------------------------------------------------------------------- API keys
def test_openai_key_is_not_sent_to_other_hosts(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.delenv("REWARDKIT_API_KEY_HOSTS", raising=False)
    with FakeServer(lambda h, n: h.reply(200, json.dumps(ok_body()).encode())) as s:
        port = s.httpd.server_address[1]
        assert fast(s.url).generate([ChatRequest(MSG)])[0].status is Status.OK
        assert s.auth == [None]  # plain http to a local server: no key
        # an allow-list entry without a scheme means https only: still not sent over http
        monkeypatch.setenv("REWARDKIT_API_KEY_HOSTS", f"127.0.0.1:{port}")
        fast(s.url).generate([ChatRequest(MSG)])
        assert s.auth[-1] is None
        monkeypatch.setenv("REWARDKIT_API_KEY_HOSTS", f"example.org, http://127.0.0.1:{port}")
        fast(s.url).generate([ChatRequest(MSG)])
        assert s.auth[-1] == "Bearer sk-secret"  # explicitly allowed for this http origin
        monkeypatch.delenv("REWARDKIT_API_KEY_HOSTS")
        fast(s.url, api_key="explicit").generate([ChatRequest(MSG)])
        assert s.auth[-1] == "Bearer explicit"
        monkeypatch.setenv("MY_JUDGE_KEY", "from-env")
        load_backend(s.url + "?model=m&api_key_env=MY_JUDGE_KEY&retries=0").generate([ChatRequest(MSG)])
        assert s.auth[-1] == "Bearer from-env"
    with pytest.raises(ValueError, match="MISSING_VAR is not set"):
        HTTPBackend("http://127.0.0.1:9/v1", api_key_env="MISSING_VAR")


def test_key_host_allow_list(monkeypatch):
    monkeypatch.delenv("REWARDKIT_API_KEY_HOSTS", raising=False)
    assert key_host_allowed("https://api.openai.com/v1")
    assert key_host_allowed("https://API.openai.com:443/v1")
    for url in ("http://api.openai.com/v1", "https://api.openai.com.evil.example/v1",
                "https://api.openai.com:8443/v1", "https://evil.example/api.openai.com/v1"):
        assert not key_host_allowed(url), url
    monkeypatch.setenv("REWARDKIT_API_KEY_HOSTS", "judge.internal:8443")
    assert key_host_allowed("https://judge.internal:8443/v1") and not key_host_allowed("http://judge.internal:8443/v1")


# ----------------------------------------------------------------------------------- quotas and Retry-After
class Stamped(FakeServer):
    """FakeServer that records the monotonic time each POST arrived (what the server saw)."""

    def __init__(self, behave):
        self.arrivals: list[float] = []

        def stamped(h, n):
            with self.lock:
                self.arrivals.append(time.monotonic())
            behave(h, n)

        super().__init__(stamped)


def test_pace_books_requests_and_tokens_per_minute_and_holds_for_retry_after():
    from rewardkit.backends.http import Pace

    rpm = Pace(120)  # one request every 0.5 s
    assert [rpm.reserve(1, now=10.0) for _ in range(3)] == [10.0, 10.5, 11.0]
    assert rpm.reserve(1, now=20.0) == 20.0  # an idle quota starts at once
    tpm = Pace(6000)  # 100 tokens per second
    assert [tpm.reserve(250, now=0.0), tpm.reserve(50, now=0.0), tpm.reserve(10, now=3.5)] == [0.0, 2.5, 3.5]
    late = Pace(1)  # one request a minute
    assert late.reserve(1, now=0.0) == 0.0 and late.reserve(1, now=0.0, latest=30.0) == 60.0  # too late: not booked
    assert late.reserve(1, now=0.0) == 60.0
    free = Pace(None)
    free.hold(7.0)
    assert [free.reserve(1, now=5.0), free.reserve(1, now=5.0), free.reserve(1, now=8.0)] == [7.0, 7.0, 8.0]


def test_both_quotas_book_a_request_at_the_time_it_is_sent():
    from rewardkit.backends.http import Pace, reserve_together

    # 2 requests a minute (one per 30 s) and 600 tokens a minute: a request of 3,000 tokens holds the token
    # quota for 5 minutes. The four small requests behind it must still go out 30 s apart once it allows,
    # not together at 300 s on request slots booked (at 30, 60, 90, 120 s) while they waited.
    rpm, tpm = Pace(2), Pace(600)
    starts = [reserve_together(((rpm, 1), (tpm, t)), now=0.0) for t in (3000, 1, 1, 1, 1)]
    assert starts == [0.0, 300.0, 330.0, 360.0, 390.0]
    assert max(sum(1 for s in starts if w <= s < w + 60) for w in starts) <= 2 + 1  # any minute: quota + one

    # a request the token quota puts after its deadline books neither quota
    rpm, tpm = Pace(60), Pace(60)
    assert reserve_together(((rpm, 1), (tpm, 120)), now=0.0) == 0.0  # the token quota is busy until 120 s
    assert reserve_together(((rpm, 1), (tpm, 1)), now=0.5, latest=30.0) == 120.0  # too late: not sent
    assert rpm.reserve(1, now=0.5) == 1.0  # the request slot at 1 s is still free
    assert tpm.reserve(1, now=0.5) == 120.0


def test_a_429_retry_after_is_waited_out_before_the_retry():
    def limited(h, n):
        if n == 1:
            h.send_response(429)
            h.send_header("Retry-After", "1")
            h.send_header("Content-Length", "2")
            h.end_headers()
            h.wfile.write(b"{}")
        else:
            h.reply(200, json.dumps(ok_body("after")).encode())

    with Stamped(limited) as s:  # backoff alone would retry within 0.05 s
        [c] = fast(s.url, retries=2, backoff=0.01, max_backoff=0.05).generate([ChatRequest(MSG)])
    assert c.status is Status.OK and c.text == "after" and s.calls == 2
    assert s.arrivals[1] - s.arrivals[0] >= 1.0  # as the server saw it


def test_requests_per_minute_paces_what_the_server_receives():
    with Stamped(lambda h, n: h.reply(200, json.dumps(ok_body()).encode())) as s:
        out = fast(s.url, concurrency=8, requests_per_minute=120).generate([ChatRequest(MSG)] * 4)  # 0.5 s apart
    assert all(c.status is Status.OK for c in out) and s.calls == 4
    t = sorted(s.arrivals)
    assert t[-1] - t[0] >= 1.0  # 3 intervals of 0.5 s (1.5 s), less what arrival jitter may take off


def test_tokens_per_minute_paces_by_the_tokens_each_request_books():
    from rewardkit.backends.http import estimated_tokens

    req = ChatRequest(MSG, max_tokens=58)  # "Say hi." ~ 2 tokens + 58 completion tokens = 60 tokens
    assert estimated_tokens({"messages": MSG, "max_tokens": 58, "n": 1}) == 60
    with Stamped(lambda h, n: h.reply(200, json.dumps(ok_body()).encode())) as s:
        out = fast(s.url, concurrency=8, tokens_per_minute=3600).generate([req] * 3)  # 60 tokens/s: 1 s each
    assert all(c.status is Status.OK for c in out)
    t = sorted(s.arrivals)
    assert t[-1] - t[0] >= 1.5  # 2 intervals of 1 s, less what arrival jitter may take off


def test_a_quota_that_cannot_be_met_before_the_deadline_is_a_timeout_status():
    with Stamped(lambda h, n: h.reply(200, json.dumps(ok_body()).encode())) as s:
        out = fast(s.url, requests_per_minute=1, deadline=5.0).generate([ChatRequest(MSG)] * 2)  # next start: 60 s
    assert [c.status for c in out].count(Status.OK) == 1 and s.calls == 1
    (late,) = [c for c in out if c.status is not Status.OK]
    assert late.status is Status.TIMEOUT and "rate limits" in late.error


# ----------------------------------------------------------------------------------- partial replies
@pytest.mark.parametrize("got,asked", [(1, 3), (3, 2)])
def test_a_reply_with_another_number_of_choices_than_n_is_an_error_status(got, asked):
    """A server (or proxy) that ignores ``n`` answers one choice for n=3: that is not the n judgments asked for
    (an MV@n judge would silently vote with fewer), so it is a malformed reply, retried like other garbage."""
    def reply(h, n):
        body = ok_body("A")
        body["choices"] = [dict(body["choices"][0], index=i) for i in range(got)]
        h.reply(200, json.dumps(body).encode())

    with FakeServer(reply) as s:
        [c] = fast(s.url, retries=1).generate([ChatRequest(MSG, n=asked)])
    assert c.status is Status.ERROR and c.texts == [] and "malformed response" in c.error
    assert f"{got} choice(s) for n={asked}" in c.error and s.calls == 2



def test_a_deadline_passed_between_attempts_says_so_without_rate_limits():
    """No quota is set: the request is refused by the deadline, and the message says that, not a rate limit."""
    def slow_500(h, n):
        time.sleep(0.6)
        try:
            h.reply(500, b"{}")
        except OSError:
            pass

    with FakeServer(slow_500) as s:
        [c] = fast(s.url, timeout=5.0, retries=3, deadline=0.3).generate([ChatRequest(MSG)])
    assert c.status is Status.TIMEOUT and "rate limits" not in c.error, c.error
    assert re.search(r"overall deadline of 0.3s exceeded after \d attempt\(s\); last: .*deadline of 0.3s reached",
                     c.error), c.error
