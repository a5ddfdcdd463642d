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


def late_ok(seconds: float):
    """A POST behaviour: wait ``seconds``, then reply 200 with ``ok_body()`` (unless the client has gone)."""
    def behave(h, n):
        time.sleep(seconds)
        try:
            h.reply(200, json.dumps(ok_body()).encode())
        except OSError:
            pass

    return behave


class FakeServer:
    """A tiny server whose POST behaviour is a function of the call number; counts calls and concurrency."""

    def __init__(self, behave, models=None):
        self.behave, self.calls, self.inflight, self.max_inflight = behave, 0, 0, 0
        self.models = models  # GET behaviour (a function of the GET number); default: one model, fake-model
        self.gets = 0
        self.bodies: list[dict] = []
        self.auth: list[str | None] = []  # the Authorization header of every request
        self.content_types: list[str | None] = []  # the Content-Type header of every POST
        self.lock = threading.Lock()
        fake = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                fake.auth.append(self.headers.get("Authorization"))
                with fake.lock:
                    fake.gets += 1
                    n = fake.gets
                if fake.models is not None:
                    try:
                        return fake.models(self, n)
                    except (BrokenPipeError, ConnectionResetError):
                        return
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
                    fake.content_types.append(self.headers.get("Content-Type"))
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
        # a short poll: shutdown() waits one poll interval (0.5 s by default) at the end of every test
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

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
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

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
    assert c.error == f"{s.url}/chat/completions: no complete response within 0.3s (after 2 attempts)"
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
    with FakeServer(late_ok(1.0)) as s:
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
    assert late.reserve(1, now=0.0, latest=120.0) == 120.0 and late.reserve(1, now=0.0) == 180.0  # at latest: booked
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
    assert late.status is Status.TIMEOUT and late.error == (
        f"{s.url}/chat/completions: overall deadline of 5.0s comes before the request-rate limits let this request "
        "start; last: no attempt made")


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
    assert c.error.endswith(f": malformed response: {got} choice(s) for n={asked} (after 2 attempts)") and s.calls == 2


@pytest.mark.parametrize("index", [[0, 0], [1, 2], [0, None]])
def test_choice_indices_that_are_not_each_sample_once_are_an_error_status(index):
    """n=2 answered as two choices both numbered 0 passes the count check, but one sample stands twice and the
    other is lost: a malformed reply. So are indices past n-1, and a second choice without an index (read as
    0, the first, like any choice without one)."""
    def reply(h, n):
        body = ok_body("A")
        first = {k: v for k, v in body["choices"][0].items() if k != "index"}
        body["choices"] = [first if i is None else dict(first, index=i) for i in index]
        h.reply(200, json.dumps(body).encode())

    with FakeServer(reply) as s:
        [c] = fast(s.url, retries=0).generate([ChatRequest(MSG, n=2)])
    assert c.status is Status.ERROR and c.texts == [] and s.calls == 1
    shown = [0 if i is None else i for i in index]
    assert c.error.endswith(f": malformed response: choice indices {shown} for n=2, not each of 0..1 once "
                            "(after 1 attempt)")


def test_a_verdict_request_with_no_score_to_read_is_refused_before_any_call():
    with FakeServer(lambda h, n: h.reply(200, json.dumps(ok_body("A")).encode())) as s:
        judge = fast(s.url)
        for choices in [(), ("A", ""), ("A", "A")]:
            with pytest.raises(ValueError, match="verdict request 1: "):
                judge.verdict_probs([VerdictRequest(MSG, ("A", "B")), VerdictRequest(MSG, choices)])
    assert s.calls == 0



def test_n_choices_are_returned_in_index_order():
    def reply(h, n):
        body = ok_body()
        body["choices"] = [{"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": f}
                           for i, t, f in ((2, "c", "length"), (0, "a", "stop"), (1, None, None))]
        h.reply(200, json.dumps(body).encode())

    with FakeServer(reply) as s:
        [c] = fast(s.url).generate([ChatRequest(MSG, n=3)])
    assert c.status is Status.OK and c.texts == ["a", "", "c"] and c.finish_reasons == ["stop", "", "length"]
    assert c.finish_reason(1) is None and c.finish_reason(2) == "length"


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


# ----------------------------------------------------------------------------------- Retry-After and backoff
def test_retry_after_reads_seconds_and_http_dates():
    from rewardkit.backends.http import retry_after

    assert [retry_after(v) for v in (None, "", "0", "1.5", "-1", "inf", "nan", "1e400", "soon")] == \
        [None, None, 0.0, 1.5, None, None, None, None, None]
    date = "Wed, 21 Oct 2015 07:28:10 GMT"  # 1445412490 s after the epoch (RFC 9110's example date)
    assert retry_after(date, now=1445412480.0) == 10.0
    assert retry_after(date, now=1445412500.0) == 0.0  # a date already past: retry now
    assert retry_after("Wed, 32 Foo 2015 07:28:10 GMT") is None
    assert retry_after("Fri, 01 Jan 2100 00:00:00 GMT") > 1e9  # against the clock: decades ahead


def _retry_after(h, code: int, seconds: str):
    h.send_response(code)
    h.send_header("Retry-After", seconds)
    h.send_header("Content-Length", "2")
    h.end_headers()
    h.wfile.write(b"{}")


def _busy_once(code: int, seconds: str, then=None):
    """A reply behaviour: the first call is ``code`` with ``Retry-After: seconds``, later calls ``then`` (default:
    200 with the text "after")."""
    def busy(h, n):
        if n == 1:
            _retry_after(h, code, seconds)
        else:
            (then or (lambda h, n: h.reply(200, json.dumps(ok_body("after")).encode())))(h, n)
    return busy


def test_a_503_retry_after_is_waited_out_and_a_500_one_is_not():
    with Stamped(_busy_once(503, "0.6")) as s:
        [c] = fast(s.url, retries=2).generate([ChatRequest(MSG)])
    assert c.status is Status.OK and s.arrivals[1] - s.arrivals[0] >= 0.6

    with Stamped(lambda h, n: _retry_after(h, 500, "30")) as s:  # a 500's Retry-After is not the protocol's
        t0 = time.monotonic()
        [c] = fast(s.url, retries=1).generate([ChatRequest(MSG)])
    assert time.monotonic() - t0 < 5 and s.calls == 2
    assert c.status is Status.ERROR and "HTTP 500" in c.error and "Retry-After" not in c.error


def test_a_retry_after_equal_to_max_retry_after_is_waited_out():
    with Stamped(_busy_once(429, "1")) as s:  # the cap is the longest wait taken, not the first one refused
        [c] = fast(s.url, retries=1, max_retry_after=1.0).generate([ChatRequest(MSG)])
    assert c.status is Status.OK and c.text == "after" and s.arrivals[1] - s.arrivals[0] >= 1.0


def test_model_discovery_waits_out_a_retry_after():
    """Discovery (GET /models) is not paced by the quotas, so its own delay is what honours Retry-After."""
    gets: list[float] = []
    busy = _busy_once(503, "0.6", then=_models_reply([{"id": "found"}]))

    def models(h, n):
        gets.append(time.monotonic())
        busy(h, n)

    with FakeServer(lambda h, n: h.reply(200, json.dumps(ok_body()).encode()), models=models) as s:
        [c] = fast(s.url, model=None, retries=2).generate([ChatRequest(MSG)])
    assert c.status is Status.OK and s.bodies[0]["model"] == "found" and gets[1] - gets[0] >= 0.6


def test_a_request_books_one_request_of_the_quota():
    # 30 requests a minute: the second starts 2 s after the first, inside a 3 s deadline (booking 2 per request
    # would put it at 4 s, past the deadline)
    with Stamped(lambda h, n: h.reply(200, json.dumps(ok_body()).encode())) as s:
        out = fast(s.url, requests_per_minute=30, deadline=3.0).generate([ChatRequest(MSG)] * 2)
    assert [c.status for c in out] == [Status.OK, Status.OK] and s.arrivals[1] - s.arrivals[0] >= 1.9


def test_a_request_refused_for_its_deadline_holds_no_slot_of_the_quota():
    with Stamped(lambda h, n: h.reply(200, json.dumps(ok_body()).encode())) as s:
        judge = fast(s.url, requests_per_minute=30, deadline=1.0)  # one request every 2 s
        first, late = judge.generate([ChatRequest(MSG)] * 2)
        assert (first.status, late.status) == (Status.OK, Status.TIMEOUT)  # its slot (2 s) is past the deadline
        time.sleep(2.2)
        [again] = judge.generate([ChatRequest(MSG)])  # the slot the late request did not take is free now
    assert again.status is Status.OK and s.calls == 2


def test_a_429_that_persists_names_its_retry_after():
    with Stamped(lambda h, n: _retry_after(h, 429, "0.2")) as s:
        [c] = fast(s.url, retries=1).generate([ChatRequest(MSG)])
    assert c.status is Status.ERROR and s.calls == 2 and s.arrivals[1] - s.arrivals[0] >= 0.2
    assert c.error == f"{s.url}/chat/completions: HTTP 429: {{}} (Retry-After 0.2s) (after 2 attempts)"


def test_a_retry_after_holds_the_other_requests_of_the_backend():
    """Request a meets a 429 (Retry-After 1 s); request b's 500 (no Retry-After) would be retried after a
    short backoff, but the server said it is out of quota for everyone: b's retry also waits the second out."""
    seen: dict[str, list[float]] = {"a": [], "b": []}

    def behave(h, n):
        who = s.bodies[n - 1]["messages"][0]["content"]
        seen[who].append(time.monotonic())
        if who == "a" and len(seen["a"]) == 1:
            _retry_after(h, 429, "1")
        elif who == "b" and len(seen["b"]) == 1:
            time.sleep(0.2)  # the 429 reaches the client first
            h.reply(500, b"{}")
        else:
            h.reply(200, json.dumps(ok_body(who)).encode())

    with FakeServer(behave) as s:
        out = fast(s.url, concurrency=2, retries=2).generate(
            [ChatRequest([{"role": "user", "content": w}]) for w in "ab"])
    assert [c.text for c in out] == ["a", "b"]
    assert len(seen["b"]) == 2 and seen["b"][1] - seen["a"][0] >= 1.0


def test_a_retry_after_beyond_the_deadline_is_a_timeout_not_a_wait():
    with Stamped(lambda h, n: _retry_after(h, 429, "10")) as s:
        t0 = time.monotonic()
        # a 3 s deadline: 0.5 s was at times spent before the first request left under mutmut's tracing
        [c] = fast(s.url, retries=2, deadline=3.0).generate([ChatRequest(MSG)])
    assert time.monotonic() - t0 < 8 and s.calls == 1  # not the 10 s asked for
    assert c.status is Status.TIMEOUT and "(Retry-After 10s)" in c.error


def test_a_retry_after_longer_than_max_retry_after_ends_the_request_at_once():
    """With no deadline (the default), a 429 asking for a day's wait was waited out in full before each retry:
    a job stalled without a word. Beyond max_retry_after (300 s by default) the request ends now, saying why."""
    assert HTTPBackend("http://127.0.0.1:9/v1").options.max_retry_after == 300.0
    with Stamped(lambda h, n: _retry_after(h, 429, "86400")) as s:
        [c] = fast(s.url, retries=3).generate([ChatRequest(MSG)])
    assert s.calls == 1 and c.status is Status.ERROR
    assert c.error == (f"{s.url}/chat/completions: HTTP 429: {{}} (Retry-After 86400s): more than "
                       "max_retry_after=300s, not waited out")
    with Stamped(lambda h, n: _retry_after(h, 503, "0.4") if n == 1 else h.reply(200, json.dumps(ok_body()).encode())) as s:
        [c] = fast(s.url, retries=1, max_retry_after=0.5).generate([ChatRequest(MSG)])  # within the cap: waited
    assert c.status is Status.OK and s.calls == 2 and s.arrivals[1] - s.arrivals[0] >= 0.4
    with Stamped(lambda h, n: _retry_after(h, 503, "0.4")) as s:
        [c] = fast(s.url, retries=1, max_retry_after=0.3).generate([ChatRequest(MSG)])
    assert s.calls == 1 and c.error.endswith("(Retry-After 0.4s): more than max_retry_after=0.3s, not waited out")
    with pytest.raises(ValueError, match="max_retry_after"):
        HTTPBackend("http://127.0.0.1:9/v1", max_retry_after=0)


def test_a_retry_after_is_not_reused_for_a_later_failure():
    """After a 429's Retry-After the next failure (a dropped connection) backs off briefly again."""
    def behave(h, n):
        if n == 1:
            _retry_after(h, 429, "0.5")
        elif n == 2:
            h.connection.shutdown(socket.SHUT_RDWR)
            h.close_connection = True
        else:
            h.reply(200, json.dumps(ok_body("third")).encode())

    with Stamped(behave) as s:
        [c] = fast(s.url, retries=3).generate([ChatRequest(MSG)])
    assert c.status is Status.OK and c.text == "third" and s.calls == 3
    assert s.arrivals[1] - s.arrivals[0] >= 0.5 and s.arrivals[2] - s.arrivals[1] < 0.4


def test_backoff_sleeps_are_capped_by_max_backoff_and_by_the_deadline():
    # base 5 s: the seeded jitter's first draw is 4.2 s (uniform in [0, 5]); the caps keep the call short
    with FakeServer(lambda h, n: h.reply(500, b"{}")) as s:
        t0 = time.monotonic()
        [c] = fast(s.url, retries=2, backoff=5.0, max_backoff=0.05).generate([ChatRequest(MSG)])
        capped = time.monotonic() - t0
        [d] = fast(s.url, retries=1, backoff=5.0, max_backoff=5.0, deadline=0.5).generate([ChatRequest(MSG)])
        bounded = time.monotonic() - t0 - capped
    assert c.status is Status.ERROR and "after 3 attempts" in c.error and capped < 1.5
    assert d.status is Status.TIMEOUT and "exceeded after 1 attempt(s)" in d.error and bounded < 2.0


# ----------------------------------------------------------------------------------- model discovery and check
def _models_reply(entries):
    def get(h, n):
        h.reply(200, json.dumps({"object": "list", "data": entries}).encode())
    return get


def test_model_discovery_failures_keep_their_status():
    never = lambda h, n: h.reply(200, json.dumps(ok_body()).encode())  # noqa: E731
    with FakeServer(never, models=lambda h, n: h.reply(404, b"no such route")) as s:
        out = HTTPBackend(s.url, timeout=2.0, retries=2, backoff=0.01).generate([ChatRequest(MSG)] * 2)
    assert [c.status for c in out] == [Status.ERROR] * 2 and s.gets == 1 and s.calls == 0  # a 404 stays a 404
    assert all(c.error == f"{s.url}/models: cannot discover the model name (RuntimeError: {s.url}/models: HTTP 404: "
               "no such route); pass model=" for c in out)

    with FakeServer(never, models=_models_reply([])) as s:  # an empty model list is garbage, retried
        [c] = HTTPBackend(s.url, timeout=2.0, retries=1, backoff=0.01).generate([ChatRequest(MSG)])
    assert c.status is Status.ERROR and s.gets == 2 and s.calls == 0
    assert c.error == (f"{s.url}/models: cannot discover the model name (RuntimeError: {s.url}/models: malformed "
                       f"""response: not a model list: {b'{"object": "list", "data": []}'!r} (after 2 attempts)); """
                       "pass model=")

    def slow(h, n):
        time.sleep(2)
        try:
            _models_reply([{"id": "late"}])(h, n)
        except OSError:
            pass

    with FakeServer(never, models=slow) as s:
        [c] = HTTPBackend(s.url, timeout=0.3, retries=0).generate([ChatRequest(MSG)])
    assert c.status is Status.TIMEOUT and "cannot discover the model name" in c.error and s.calls == 0


def test_no_requests_no_traffic():
    with FakeServer(lambda h, n: h.reply(200, json.dumps(ok_body()).encode())) as s:
        b = HTTPBackend(s.url, timeout=2.0)
        assert b.generate([]) == [] and b.verdict_probs([]) == []
    assert s.gets == 0 and s.calls == 0 and b.model is None and b.served_name() == "judge"


def test_check_finds_the_model_or_says_what_is_wrong():
    ok = lambda h, n: h.reply(200, json.dumps(ok_body()).encode())  # noqa: E731
    with FakeServer(ok, models=_models_reply([{"id": "first"}, {"id": "second"}])) as s:
        b = HTTPBackend(s.url, timeout=2.0)
        b.check()
        assert b.model == "first" and b.model_id == f"http:first@{s.url}" and b.served_name() == "first"
        explicit = fast(s.url, model="second")
        explicit.check()
        assert explicit.model == "second"
        with pytest.raises(ValueError, match=rf"^judge {s.url}: its /models does not list 'third' \(it lists 'first', "
                           "'second'\\)$"):
            fast(s.url, model="third").check()
        assert b.models() == ["first", "second"]
    with FakeServer(ok, models=lambda h, n: h.reply(503, b"starting")) as s:
        with pytest.raises(ValueError, match=rf"^judge {s.url}: GET {s.url}/models failed \(HTTP 503\); is an "
                           "OpenAI-compatible judge server running at that URL\\?$"):
            fast(s.url, retries=3).check()
    assert s.gets == 1  # no retries: a stopped server is found at once
    unnamed = b'{"data": [{"name": "' + b"n" * 100 + b'"}]}'  # entries without an id; quoted to 80 bytes
    with FakeServer(ok, models=lambda h, n: h.reply(200, unnamed)) as s:
        with pytest.raises(ValueError) as e:
            fast(s.url).check()
    assert f"/models failed (_Garbage: not a model list: {unnamed[:80]!r}); is an" in str(e.value)
    url = s.url  # the server is gone: nothing listens there any more
    with pytest.raises(ValueError, match="ConnectError"):
        fast(url).check()


def test_cache_identity_keys_on_the_served_entry_without_volatile_fields():
    entries = [{"id": "a", "object": "model", "created": 1, "permission": [{"x": 1}], "root": "/w/a"},
               {"id": "b", "object": "model", "created": 2, "root": "/w/b", "max_model_len": 4096}]
    with FakeServer(lambda h, n: None, models=_models_reply(entries)) as s:
        b = HTTPBackend(s.url, timeout=2.0)
        assert json.loads(b.cache_identity()) == {"url": s.url, "model": "a", "served": {"id": "a", "root": "/w/a"}}
        assert b.model == "a"  # discovered as the first listed
        assert json.loads(fast(s.url, model="b").cache_identity())["served"] == \
            {"id": "b", "root": "/w/b", "max_model_len": 4096}
        with pytest.raises(RuntimeError, match=rf"^{s.url}/models does not list 'c' \(it lists \['a', 'b'\]\)$"):
            fast(s.url, model="c").cache_identity()
        first = fast(s.url, model="b").cache_identity()
        entries[1]["root"] = "/w/other"  # another model behind the same name: another key
        assert fast(s.url, model="b").cache_identity() != first
        entries[1]["created"] = 3  # stamped per request: the same key
        assert fast(s.url, model="b").cache_identity() == fast(s.url, model="b").cache_identity()


# ----------------------------------------------------------------------------------- requests as sent
def test_request_bodies_carry_what_was_asked_and_nothing_unset():
    with FakeServer(lambda h, n: h.reply(200, json.dumps(ok_body("A", [("A", -0.1)])).encode())) as s:
        b = fast(s.url, top_logprobs=5)
        b.generate([ChatRequest(MSG, max_tokens=7, temperature=0.5, top_p=0.9, min_tokens=3)])
        b.generate([ChatRequest(MSG, stop=[])])
        b.verdict_probs([VerdictRequest(MSG, ["A", "B"])])
    full, bare, verdict = s.bodies
    assert s.content_types == ["application/json"] * 3
    assert {k: full[k] for k in ("model", "max_tokens", "temperature", "top_p", "n", "min_tokens")} == \
        {"model": "m", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "n": 1, "min_tokens": 3}
    assert "seed" not in full and "stop" not in full
    assert not {"seed", "stop", "min_tokens"} & set(bare)
    assert verdict == {"model": "m", "messages": MSG, "max_tokens": 1, "temperature": 0.0, "n": 1,
                       "logprobs": True, "top_logprobs": 5}  # no prefix: a new assistant turn
    prefixed = fast("http://127.0.0.1:9/v1")._verdict_body(VerdictRequest(MSG, ["A"], "\\boxed{"))
    assert prefixed["continue_final_message"] is True and prefixed["add_generation_prompt"] is False
    assert MSG == [{"role": "user", "content": "Say hi."}]  # the caller's list is not appended to


def test_a_reply_without_usage_counts_no_tokens():
    body = ok_body("hi", [("hi", -0.1)])
    del body["usage"]
    with FakeServer(lambda h, n: h.reply(200, json.dumps(body).encode())) as s:
        [c] = fast(s.url).generate([ChatRequest(MSG)])
        [v] = fast(s.url).verdict_probs([VerdictRequest(MSG, ["hi", "no"])])
        [w] = fast(s.url).verdict_probs([VerdictRequest(MSG, ["yes", "no"])])
    assert (c.status, c.text, c.prompt_tokens, c.completion_tokens) == (Status.OK, "hi", 0, 0)
    assert (v.status, v.probs.tolist(), v.prompt_tokens) == (Status.OK, [1.0, 0.0], 0)
    assert (w.status, w.prompt_tokens) == (Status.ERROR, 0)


def test_estimated_tokens_books_text_and_completion_budget():
    from rewardkit.backends.http import estimated_tokens

    two = [{"role": "system", "content": "ab"}, {"role": "user", "content": "cdefghi"}]  # 9 characters
    assert estimated_tokens({"messages": two, "max_tokens": 10, "n": 3}) == 3 + 30  # ceil(9 / 4) + 10 x 3
    assert estimated_tokens({"messages": two[:1]}) == 1  # no max_tokens, no n: the text alone
    assert estimated_tokens({"messages": [], "max_tokens": 5, "n": None}) == 5
    assert estimated_tokens({"messages": [{"role": "user", "content": ""}], "max_tokens": 0}) == 0
    parts = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]  # as JSON: 32 characters
    assert estimated_tokens({"messages": parts, "max_tokens": 1}) == 8 + 1


def test_options_are_checked():
    for bad, why in [(dict(top_logprobs=21), r"^option 'top_logprobs': must be <= 20 \(the OpenAI API's limit\), got 21$"), (dict(top_logprobs=0), "top_logprobs"),
                     (dict(concurrency=0), "concurrency"), (dict(timeout=0), "timeout"), (dict(retries=-1), "retries"),
                     (dict(deadline=0), "deadline"), (dict(requests_per_minute=0), "requests_per_minute"),
                     (dict(tokens_per_minute=-5), "tokens_per_minute"), (dict(backoff=-1), "backoff")]:
        with pytest.raises(ValueError, match=why):
            HTTPBackend("http://127.0.0.1:9/v1", **bad)
    assert HTTPBackend("http://127.0.0.1:9/v1", top_logprobs=20, retries=0, backoff=0).options.top_logprobs == 20
    for url in ("127.0.0.1:9/v1", "ftp://127.0.0.1/v1", "unix:///tmp/judge.sock"):
        with pytest.raises(ValueError, match=rf"^option 'base_url': expected http\(s\)://HOST\[:PORT\]/v1, got '{url}'$"):
            HTTPBackend(url)
    b = HTTPBackend("HTTPS://judge.example/v1/", model="m")
    assert b.base_url == "HTTPS://judge.example/v1" and b.model_id == "http:m@HTTPS://judge.example/v1"
    assert HTTPBackend("http://127.0.0.1:9/XX//").base_url == "http://127.0.0.1:9/XX"  # slashes only


def test_credentials_in_the_url_become_basic_auth_and_leave_the_url(monkeypatch):
    import base64

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeServer(lambda h, n: h.reply(200, json.dumps(ok_body()).encode())) as s:
        url = s.url.replace("http://", "http://me:p%40ss@")
        b = fast(url)
        assert b.base_url == s.url and "p%40ss" not in b.model_id
        assert b.generate([ChatRequest(MSG)])[0].status is Status.OK
    assert s.auth == ["Basic " + base64.b64encode(b"me:p@ss").decode()]


def test_an_empty_api_key_sends_none(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    with FakeServer(lambda h, n: h.reply(200, json.dumps(ok_body()).encode())) as s:
        monkeypatch.setenv("REWARDKIT_API_KEY_HOSTS", f" , http://127.0.0.1:{s.httpd.server_address[1]},")
        fast(s.url).generate([ChatRequest(MSG)])
        fast(s.url, api_key="").generate([ChatRequest(MSG)])  # explicitly none, not $OPENAI_API_KEY
    assert s.auth == ["Bearer sk-secret", None]
    monkeypatch.setenv("EMPTY_KEY", "")
    with pytest.raises(ValueError, match="^option 'api_key_env': the environment variable EMPTY_KEY is not set$"):
        HTTPBackend("http://127.0.0.1:9/v1", api_key_env="EMPTY_KEY")


def test_key_host_allow_list_ports_and_schemes(monkeypatch):
    monkeypatch.setenv("REWARDKIT_API_KEY_HOSTS", "http://judge.internal, HTTPS://Secure.Internal")
    assert key_host_allowed("http://judge.internal/v1") and key_host_allowed("http://judge.internal:80/v1")
    assert not key_host_allowed("http://judge.internal:8080/v1") and not key_host_allowed("https://judge.internal/v1")
    assert key_host_allowed("https://secure.internal:443/v1") and key_host_allowed("https://SECURE.internal/v1")
    for url in ("ftp://api.openai.com/v1", "http:///v1", "judge.internal"):
        assert not key_host_allowed(url), url


def test_a_request_that_cannot_be_encoded_is_an_error_status_not_a_crash():
    with FakeServer(lambda h, n: h.reply(200, json.dumps(ok_body()).encode())) as s:
        out = fast(s.url).generate([ChatRequest([{"role": "user", "content": {1, 2}}]), ChatRequest(MSG)])
    assert out[0].status is Status.ERROR and "not JSON serializable" in out[0].error and s.url in out[0].error
    assert out[1].status is Status.OK and s.calls == 1


def test_errors_of_a_call_made_inside_an_event_loop_reach_the_caller():
    import asyncio

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()

    async def main():
        return fast(f"http://127.0.0.1:{port}/v1").models()

    with pytest.raises(httpx.ConnectError):
        asyncio.run(main())


# ----------------------------------------------------------------------------------- odd log-probabilities
def _verdict_with_top(top) -> VerdictResult:
    body = ok_body("A", [("A", -0.1)])
    body["choices"][0]["logprobs"]["content"][0]["top_logprobs"] = top
    with FakeServer(lambda h, n: h.reply(200, json.dumps(body).encode())) as s:
        [v] = fast(s.url).verdict_probs([VerdictRequest(MSG, ["A", "B"])])
    return v


def test_log_probabilities_of_minus_infinity_and_rounding_above_zero_are_read():
    v = _verdict_with_top([{"token": "A", "logprob": float("-inf")}, {"token": "B", "logprob": -1.0}])
    assert v.status is Status.OK and v.probs.tolist() == [0.0, 1.0]
    v = _verdict_with_top([{"token": "A", "logprob": 0.0005}, {"token": "B", "logprob": -1.0}])
    e = np.exp([0.0005, -1.0])
    assert v.status is Status.OK
    np.testing.assert_allclose(v.probs, e / e.sum())


@pytest.mark.parametrize("top,why", [
    (["A"], "has no token string"), ([{"token": None, "logprob": -1}], "has no token string"),
    ([{"token": "A", "logprob": None}], "None of token 'A'"), ([{"token": "A", "logprob": float("nan")}], "nan"),
    ([{"token": "A", "logprob": float("inf")}], "inf"), ([{"token": "A", "logprob": 0.002}], "0.002"),
])
def test_malformed_top_logprobs_entries_are_an_error_status(top, why):
    v = _verdict_with_top(top)
    assert v.status is Status.ERROR and "malformed top_logprobs" in v.error and why in v.error and v.probs.size == 0
    assert v.prompt_tokens == 7


@pytest.mark.parametrize("logprobs,why", [
    ({"content": []}, "no top_logprobs"), ({"content": [{"token": "A"}]}, "no top_logprobs"),
    ({"content": [{"token": "A", "top_logprobs": {"A": -0.1}}]}, "no top_logprobs"),
    ({"content": "A"}, "no top_logprobs"), ({"content": [{"token": "A", "top_logprobs": []}]}, "none of the choices"),
])
def test_missing_or_empty_top_lists_are_an_error_status(logprobs, why):
    body = ok_body("A")
    body["choices"][0]["logprobs"] = logprobs
    with FakeServer(lambda h, n: h.reply(200, json.dumps(body).encode())) as s:
        [v] = fast(s.url).verdict_probs([VerdictRequest(MSG, ["A", "B"])])
    assert v.status is Status.ERROR and why in v.error and v.probs.size == 0 and v.prompt_tokens == 7


def test_choice_logprobs_counts_only_unambiguous_nonblank_finite_prefixes():
    lp, err = choice_logprobs(["Tie", "True"], [("T", -0.1), ("Ti", -1.0), (" Tr", -2.0)])
    assert err is None and lp.tolist() == [-1.0, -2.0]  # "T" starts both choices: it counts for neither
    lp, err = choice_logprobs(["A"], [(" \n", -0.1), ("A", -2.0)])
    assert err is None and lp.tolist() == [-2.0]  # a blank token is a prefix of nothing
    lp, err = choice_logprobs(["A", "B"], [("A", float("nan")), ("B", -1.0), ("x", float("-inf"))])
    assert err is None and lp.tolist() == [-np.inf, -1.0]
    lp, err = choice_logprobs(["A", "B"], [("A", float("-inf"))])
    assert err and "none of the choices ['A', 'B']" in err and "top 1 next tokens" in err
    lp, err = choice_logprobs(["A", "B"], [("A", -1.0), (" A", -2.0), ("B", -3.0)])
    np.testing.assert_allclose(lp, [np.log(np.exp(-1.0) + np.exp(-2.0)), -3.0])


# ----------------------------------------------------------------------------------- what is retried
@pytest.mark.parametrize("code", [408, 409, 425, 429, 500, 502, 503, 504])
def test_transient_statuses_are_retried(code):
    with FakeServer(lambda h, n: h.reply(code, b"{}") if n == 1 else h.reply(200, json.dumps(ok_body()).encode())) as s:
        [c] = fast(s.url, retries=1).generate([ChatRequest(MSG)])
    assert c.status is Status.OK and s.calls == 2


@pytest.mark.parametrize("code", [201, 401, 403, 404, 422, 501])
def test_other_statuses_are_not_retried(code):
    with FakeServer(lambda h, n: h.reply(code, b"{}")) as s:
        [c] = fast(s.url, retries=2).generate([ChatRequest(MSG)])
    assert c.status is Status.ERROR and f"HTTP {code}" in c.error and "attempts" not in c.error and s.calls == 1


def test_an_error_reply_is_quoted_on_one_line_and_cut_at_200_characters():
    with FakeServer(lambda h, n: h.reply(400, b"x" * 198 + b"\ny" + b"z" * 100)) as s:
        [c] = fast(s.url).generate([ChatRequest(MSG)])
    assert c.error == f"{s.url}/chat/completions: HTTP 400: {'x' * 198} y"


def test_the_last_attempt_is_not_followed_by_a_backoff_sleep():
    with FakeServer(lambda h, n: h.reply(500, b"{}")) as s:
        t0 = time.monotonic()
        [c] = fast(s.url, retries=0, backoff=5.0, max_backoff=5.0).generate([ChatRequest(MSG)])  # a draw: 4.2 s
    assert c.status is Status.ERROR and "after 1 attempt)" in c.error and time.monotonic() - t0 < 2.0


def test_httpx_timeouts_are_timeout_statuses_and_other_transport_errors_are_errors(monkeypatch):
    raised = iter([httpx.ReadTimeout("slow read"), httpx.RemoteProtocolError("peer closed")])

    async def post(self, url, **kw):
        raise next(raised)

    monkeypatch.setattr(httpx.AsyncClient, "post", post)
    b = fast("http://127.0.0.1:9/v1", retries=0)
    [t] = b.generate([ChatRequest(MSG)])
    [e] = b.generate([ChatRequest(MSG)])
    url = "http://127.0.0.1:9/v1/chat/completions"
    assert t.status is Status.TIMEOUT and t.error == f"{url}: ReadTimeout: slow read (after 1 attempt)"
    assert e.status is Status.ERROR and e.error == f"{url}: RemoteProtocolError: peer closed (after 1 attempt)"


def test_a_request_stuck_past_the_deadline_is_cancelled_as_a_timeout(monkeypatch):
    """Belt and braces: should a request outlive its per-attempt bounds, the batch still ends at the deadline
    (plus a second of grace) with a timeout status, and a request that raised is an error status."""
    import asyncio

    async def stuck(self, client, body, end, tokens=0):
        if body["messages"][0]["content"] == "raise":
            raise RuntimeError("boom")
        await asyncio.sleep(30)

    monkeypatch.setattr(HTTPBackend, "_with_retries", stuck)
    b = fast("http://127.0.0.1:9/v1", deadline=0.2)
    t0 = time.monotonic()
    out = b.generate([ChatRequest(MSG), ChatRequest([{"role": "user", "content": "raise"}])])
    assert 1.1 <= time.monotonic() - t0 < 1.9  # the deadline's 0.2 s and the one second of grace
    assert out[0].status is Status.TIMEOUT and out[0].error == "http://127.0.0.1:9/v1: overall deadline of 0.2s exceeded"
    assert out[1].status is Status.ERROR and out[1].error == "http://127.0.0.1:9/v1: RuntimeError: boom"


def test_listing_models_waits_at_most_30_seconds(monkeypatch):
    import asyncio

    limits, real = [], asyncio.wait_for

    def spy(aw, timeout):
        limits.append(timeout)
        return real(aw, timeout)

    monkeypatch.setattr(asyncio, "wait_for", spy)
    clients, Client = [], httpx.AsyncClient

    class Recording(Client):
        def __init__(self, **kw):
            clients.append(kw.get("timeout"))
            super().__init__(**kw)

    monkeypatch.setattr(httpx, "AsyncClient", Recording)
    with FakeServer(lambda h, n: None) as s:
        HTTPBackend(s.url).models()  # the default timeout, 120 s
        HTTPBackend(s.url, timeout=2.0).models()
    assert limits == [30.0, 2.0] and clients == [30.0, 2.0]  # the whole call and httpx's own timeouts


# ----------------------------------------------------------------------------------- odd replies, continued
@pytest.mark.parametrize("payload", [b'{"choices": [{"text": "hi"}]}', b'{"choices": ["hi"]}',
                                     b'{"choices": {"0": {"message": {"content": "hi"}}}}', b"[1, 2]"])
def test_a_reply_that_is_not_a_chat_completion_is_an_error_status(payload):
    with FakeServer(lambda h, n: h.reply(200, payload)) as s:
        [c] = fast(s.url, retries=0).generate([ChatRequest(MSG)])
    assert c.status is Status.ERROR and "malformed response" in c.error and "choice" in c.error


def test_a_boolean_token_count_is_malformed():
    def mutate(b):
        b["usage"]["prompt_tokens"] = True

    with FakeServer(lambda h, n: h.reply(200, json.dumps(_odd(mutate)).encode())) as s:
        [c] = fast(s.url, retries=0).generate([ChatRequest(MSG)])
    assert c.status is Status.ERROR and "usage.prompt_tokens is True, not a token count" in c.error


def test_a_choice_without_an_index_counts_as_the_first():
    def reply(h, n):
        body = ok_body()
        body["choices"] = [{"index": 1, "message": {"content": "second"}}, {"message": {"content": "first"}}]
        h.reply(200, json.dumps(body).encode())

    with FakeServer(reply) as s:
        [c] = fast(s.url).generate([ChatRequest(MSG, n=2)])
    assert c.texts == ["first", "second"]


def test_verdict_probabilities_survive_very_unlikely_choices():
    """Every choice at about -400 nats: normalised over the choices, not lost to underflow (exp(-800) = 0)."""
    v = _verdict_with_top([{"token": "A", "logprob": -400.0}, {"token": "B", "logprob": -401.0}])
    assert v.status is Status.OK
    np.testing.assert_allclose(v.probs, [1 / (1 + np.exp(-1.0)), np.exp(-1.0) / (1 + np.exp(-1.0))])


def test_the_documented_defaults_and_smallest_options():
    """docs/backends.md: 16 in flight, 3 retries, 0.5 s backoff base capped at 8 s, top_logprobs 20, no quotas."""
    o = HTTPBackend("http://127.0.0.1:9/v1").options
    assert (o.concurrency, o.retries, o.backoff, o.max_backoff, o.top_logprobs) == (16, 3, 0.5, 8.0, 20)
    assert o.timeout == 120.0  # per attempt: a long judgment at a slow server's pace fits
    assert (o.model, o.deadline, o.requests_per_minute, o.tokens_per_minute, o.seed) == (None, None, None, None, None)
    assert HTTPBackend("http://127.0.0.1:9/v1").model_id == "http:?@http://127.0.0.1:9/v1"  # model not known yet
    small = HTTPBackend("http://127.0.0.1:9/v1", concurrency=1, top_logprobs=1, retries=0, backoff=0,
                        max_backoff=0).options
    assert (small.concurrency, small.top_logprobs, small.retries) == (1, 1, 0)


def test_a_url_httpx_refuses_is_a_value_error_that_hides_the_password():
    with pytest.raises(ValueError, match=r"^option 'base_url': '.*' is not a URL httpx accepts \(write '/', '\?', '#' "
                       r"and control characters in a user name or password percent-encoded: %2F %3F %23\)$") as e:
        HTTPBackend("http://me:hunter2@[::1/v1")
    assert "hunter2" not in str(e.value)


def test_cache_identity_does_not_depend_on_the_order_of_the_entry_fields():
    orders = iter([{"id": "m", "root": "/w", "max_model_len": 8}, {"max_model_len": 8, "root": "/w", "id": "m"}])
    with FakeServer(lambda h, n: None, models=lambda h, n: _models_reply([next(orders)])(h, n)) as s:
        b = fast(s.url)
        assert b.cache_identity() == b.cache_identity()


# ----------------------------------------------------------------------------------- messages, word for word
LONG = b'{"foo": "' + b"x" * 100 + b'"}'  # longer than the 80 bytes a message quotes


@pytest.mark.parametrize("payload,says", [
    (LONG, f"no 'choices' list: {LONG[:80]!r}"),
    (b'{"choices": [{"text": "' + b"y" * 100 + b'"}]}',
     f"""a choice without a 'message': {(b'{"choices": [{"text": "' + b"y" * 100)[:80]!r}"""),
    (b'{"choices": [{"message": {"content": 5}}]}', "message content is not a string"),
    (b'{"choices": [{"index": -1, "message": {"content": "a"}}]}', "choice index -1 is not a non-negative integer"),
    (b'{"choices": [{"message": {"content": "a"}, "finish_reason": 1}]}', "finish_reason 1 is not a string"),
    (b'{"choices": [{"message": {"content": "a"}}], "usage": 3}', "'usage' is int, not an object"),
    (b'{"choices": [{"message": {"content": "a"}}], "usage": {"completion_tokens": 1.5}}',
     "usage.completion_tokens is 1.5, not a token count"),
    (b"z" * 100, f"not JSON (Expecting value: line 1 column 1 (char 0)): {b'z' * 80!r}"),
])
def test_malformed_replies_say_what_is_wrong(payload, says):
    with FakeServer(lambda h, n: h.reply(200, payload)) as s:
        [c] = fast(s.url, retries=0).generate([ChatRequest(MSG)])
    assert c.status is Status.ERROR
    assert c.error == f"{s.url}/chat/completions: malformed response: {says} (after 1 attempt)"


def test_verdict_errors_say_what_is_wrong():
    top = [{"token": t, "logprob": -1.0 - i} for i, t in enumerate("cdefgh")]
    for v, says in [
        (_verdict_with_top([]), "none of the choices ['A', 'B'] is among the top 0 next tokens ([]...)"),
        (_verdict_with_top(top), "none of the choices ['A', 'B'] is among the top 6 next tokens "
                                 "(['c', 'd', 'e', 'f', 'g']...)"),
        (_verdict_with_top([{"token": "A", "logprob": "-0.5"}]),
         "malformed top_logprobs: log-probability '-0.5' of token 'A' is not a number <= 0"),
        (_verdict_with_top(["A" * 100]), f"malformed top_logprobs: entry {'A' * 60} has no token string"),
    ]:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1: " + re.escape(says), v.error), v.error
    body = ok_body("A")
    with FakeServer(lambda h, n: h.reply(200, json.dumps(body).encode())) as s:
        [v] = fast(s.url).verdict_probs([VerdictRequest(MSG, ["A", "B"])])
    assert v.error == (f"{s.url}: the server returned no top_logprobs; verdict_probs over HTTP needs a server that "
                       "supports logprobs=true/top_logprobs (vLLM, SGLang, OpenAI, rewardkit serve-judge); use "
                       "generate + verdict parsing instead")


def test_only_five_listed_models_are_named():
    many = [{"id": f"m{i}"} for i in range(7)]
    with FakeServer(lambda h, n: None, models=_models_reply(many)) as s:
        with pytest.raises(ValueError, match=r"\(it lists 'm0', 'm1', 'm2', 'm3', 'm4'\)$"):
            fast(s.url, model="zz").check()
        with pytest.raises(RuntimeError, match=r"\(it lists \['m0', 'm1', 'm2', 'm3', 'm4'\]\)$"):
            fast(s.url, model="zz").cache_identity()


def test_backoff_jitter_is_seeded(monkeypatch):
    """The same seed sleeps the same backoffs; each within [0, min(max_backoff, backoff x 2^attempt)]."""
    import asyncio

    real, slept = asyncio.sleep, []

    async def sleep(delay, *a, **kw):
        slept.append(delay)
        await real(0)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    runs = []
    with FakeServer(lambda h, n: h.reply(500, b"{}")) as s:
        for seed in (1, 1, 2):
            slept.clear()
            fast(s.url, retries=3, backoff=1.0, max_backoff=3.0, seed=seed).generate([ChatRequest(MSG)])
            runs.append(list(slept))
    assert runs[0] == runs[1] != runs[2] and all(len(r) == 3 for r in runs)
    assert all(0 <= r[0] <= 1.0 and 0 <= r[1] <= 2.0 and 0 <= r[2] <= 3.0 for r in runs)


def test_calls_from_inside_an_event_loop_run_on_a_named_thread(monkeypatch):
    import asyncio

    names = []

    from rewardkit.backends.http import _Outcome

    async def record(self, client, body, end, tokens=0):
        names.append(threading.current_thread().name)
        return _Outcome(None, Status.ERROR, "x")

    monkeypatch.setattr(HTTPBackend, "_with_retries", record)

    async def main():
        return fast("http://127.0.0.1:9/v1").generate([ChatRequest(MSG)])

    asyncio.run(main())
    fast("http://127.0.0.1:9/v1").generate([ChatRequest(MSG)])
    assert names == ["rewardkit-http", threading.current_thread().name]


def test_an_attempt_cut_by_the_deadline_says_so():
    with FakeServer(late_ok(2)) as s:
        [c] = fast(s.url, timeout=5.0, retries=0, deadline=0.3).generate([ChatRequest(MSG)])
    assert c.status is Status.TIMEOUT
    assert c.error == f"{s.url}/chat/completions: overall deadline of 0.3s reached (after 1 attempt)"


def test_without_an_allow_list_the_openai_key_goes_to_api_openai_com_only(monkeypatch):
    monkeypatch.delenv("REWARDKIT_API_KEY_HOSTS", raising=False)
    for url in ("https://xxxx/v1", "https://localhost/v1", "https://openai.com/v1", "https://x/v1"):
        assert not key_host_allowed(url), url


def test_listing_models_sends_the_credentials(monkeypatch):
    import base64

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeServer(lambda h, n: None) as s:
        fast(s.url, model="fake-model", api_key="k").check()
        HTTPBackend(s.url.replace("http://", "http://me:pw@"), model="fake-model").check()
    assert s.auth == ["Bearer k", "Basic " + base64.b64encode(b"me:pw").decode()]


def test_a_model_list_that_is_a_json_list_is_malformed():
    with FakeServer(lambda h, n: None, models=lambda h, n: h.reply(200, b'["m"]')) as s:
        with pytest.raises(ValueError) as e:
            fast(s.url).check()
    assert """(_Garbage: not a model list: b'["m"]')""" in str(e.value)


def test_a_failed_verdict_request_has_no_probabilities():
    with FakeServer(lambda h, n: h.reply(400, b"bad")) as s:
        [v] = fast(s.url).verdict_probs([VerdictRequest(MSG, ["A", "B"])])
    assert v.status is Status.ERROR and v.probs.shape == (0,) and v.prompt_tokens == 0
    assert v.error == f"{s.url}/chat/completions: HTTP 400: bad"


def test_a_log_probability_rounded_up_to_a_thousandth_is_tolerated_and_no_warning_for_missing_choices():
    import warnings

    v = _verdict_with_top([{"token": "A", "logprob": 1e-3}, {"token": "B", "logprob": -1.0}])
    assert v.status is Status.OK
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # log(0) for the choice missing from the top list: -inf, silently
        lp, err = choice_logprobs(["A", "B"], [("A", -0.5)])
    assert err is None and lp[1] == -np.inf
