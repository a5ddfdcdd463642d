"""Stand-in Kimina Lean Server: a real HTTP server on 127.0.0.1 (http.server in a thread).

POST /api/check {"snippets": [{"id", "code"}], "timeout": s, "debug": bool, "reuse": bool}
  -> {"results": [{"id", "time", "error", "response"}]} where "response" is the REPL response
     ({"env", "messages"?}, severity "info" for Lean's information, as the REPL writes it) of
     `_engine.elaborate`, and "error" is null or a string.
GET /health -> {"status": "ok"}. With api_key set, requests need "Authorization: Bearer <key>" (else 401).
A snippet containing HANG_MARKER takes longer than its timeout and comes back with an error string.
``start(reply=BYTES)`` answers every check with those bytes instead (a server that misbehaves).
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _engine import elaborate, repl_message  # noqa: E402

HANG_MARKER = "-- standin: hang"


def _check(code: str, timeout: float) -> dict:
    t0 = time.perf_counter()
    if HANG_MARKER in code:
        time.sleep(min(timeout, 2.0))
        return {"time": time.perf_counter() - t0, "error": "Lean REPL command timed out.", "response": None}
    msgs = [repl_message(m) for m in elaborate(code)]
    resp: dict = {"env": 0}
    if msgs:
        resp["messages"] = msgs
    return {"time": time.perf_counter() - t0, "error": None, "response": resp}


def make_handler(api_key: str | None, log: list, reply: bytes | None = None):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):  # quiet
            pass

        def _send(self, code: int, obj) -> None:
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _authorised(self) -> bool:
            if api_key and self.headers.get("Authorization") != f"Bearer {api_key}":
                self._send(401, {"detail": "Invalid API key"})
                return False
            return True

        def do_GET(self):
            if not self._authorised():
                return
            if self.path == "/health":
                self._send(200, {"status": "ok"})
            else:
                self._send(404, {"detail": "Not Found"})

        def do_POST(self):
            if not self._authorised():
                return
            n = int(self.headers.get("Content-Length", 0))
            req = json.loads(self.rfile.read(n) or b"{}")
            log.append((self.path, req))
            if self.path == "/api/check" and reply is not None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)
            elif self.path == "/api/check":
                t = float(req.get("timeout", 60))
                out = [{"id": s["id"], **_check(s["code"], t)} for s in req.get("snippets", [])]
                self._send(200, {"results": out})
            else:
                self._send(404, {"detail": "Not Found"})

    return Handler


def start(api_key: str | None = None, reply: bytes | None = None):
    """Start on a free port; returns (server, base_url, request_log). Stop with server.shutdown()."""
    log: list = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(api_key, log, reply))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}", log
