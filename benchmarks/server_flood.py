"""Connection floods on loopback against the real `rewardkit serve` and `rewardkit serve-judge` processes:
how many requests of a legitimate client (with the key, a new connection each) get through while an attacker
holds up to 1,000 idle sockets (reopening each one the server closes), or 300 requests with complete headers
and a body that never finishes.

    python benchmarks/server_flood.py                              # this checkout, ~3 minutes
    python benchmarks/server_flood.py --server-ref 07d8b58 --out server_flood_before   # the code before issue 22

Bounded by construction: 127.0.0.1 only, at most ``--idle`` + ``--stalled`` attacker sockets, each phase
``--seconds`` long. The baseline (the same client, no flood) runs in the same process before each flood.
``--server-ref`` runs the servers of another commit (unpacked with ``git archive`` into a temporary folder)
with this client, so the code before a fix is measured the same way.
"""

from __future__ import annotations

import argparse
import errno
import os
import re
import selectors
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import checkout, machine, write_results  # noqa: E402

KEY = "flood-bench-key"
HOST = "127.0.0.1"


class Flood(threading.Thread):
    """Up to ``n`` sockets to HOST:port, each reopened as soon as the server closes it. ``stalled``: each
    sends complete request headers (with the key) and 10 of 1,000 announced body bytes, then nothing."""

    def __init__(self, port: int, n: int, stalled: bytes | None = None):
        super().__init__(daemon=True)
        self.port, self.n, self.stalled = port, n, stalled
        self.stop = threading.Event()
        self.opened = self.closed_by_server = 0
        self.peak = 0

    def _open(self, sel: selectors.BaseSelector) -> None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        rc = s.connect_ex((HOST, self.port))
        if rc not in (0, errno.EINPROGRESS):
            s.close()
            return
        sel.register(s, selectors.EVENT_WRITE, "connecting")
        self.opened += 1

    def run(self) -> None:
        sel = selectors.DefaultSelector()
        try:
            while not self.stop.is_set():
                while len(sel.get_map()) < self.n:
                    self._open(sel)
                self.peak = max(self.peak, len(sel.get_map()))
                for key, mask in sel.select(timeout=0.05):
                    s: socket.socket = key.fileobj  # type: ignore[assignment]
                    if key.data == "connecting" and mask & selectors.EVENT_WRITE:
                        if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                            sel.unregister(s)
                            s.close()
                            continue
                        if self.stalled:
                            s.send(self.stalled)
                        sel.modify(s, selectors.EVENT_READ, "open")
                        continue
                    try:
                        data = s.recv(65536)
                    except (ConnectionError, BlockingIOError):
                        data = b""
                    if not data:  # closed by the server: reopen (the loop tops up)
                        self.closed_by_server += 1
                        sel.unregister(s)
                        s.close()
        finally:
            for key in list(sel.get_map().values()):
                key.fileobj.close()  # type: ignore[union-attr]
            sel.close()


def one_write_burst(port: int, request: bytes, n: int, timeout: float = 60.0, split: bool = False) -> dict[str, int]:
    """``n`` clients on HOST:port at once, each sending ``request`` (headers and body) in one write, all sent
    before any answer is read: the count of each answer's status (or of each error's name). ``split``: as httpx
    does, headers and body in two writes; every client's headers go out, then one second passes (the server
    reads them all and waits for the bodies), then every body."""
    socks = [socket.create_connection((HOST, port), timeout=timeout) for _ in range(n)]
    got: dict[str, int] = {}
    head, sep, body = request.partition(b"\r\n\r\n")
    writes = [head + sep, body] if split else [request]
    try:
        for k, part in enumerate(writes):
            if k:
                time.sleep(1.0)
            for s in socks:
                try:
                    s.sendall(part)
                except OSError:  # already answered and closed: its answer is read below
                    pass
        for s in socks:
            buf, status = b"", None
            try:
                while b"\r\n" not in buf:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    buf += chunk
                status = buf.split(b" ", 2)[1].decode() if b"\r\n" in buf else "closed"
            except OSError as e:
                status = type(e).__name__
            got[status] = got.get(status, 0) + 1
    finally:
        for s in socks:
            s.close()
    return got


def post_request(path: str, body: bytes, key: str | None = None) -> bytes:
    """A complete HTTP/1.1 POST of a JSON ``body``: what ``one_write_burst`` sends."""
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    return (f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\n{auth}Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def start_server(root: Path, args: list[str]) -> tuple[subprocess.Popen, str]:
    """A real `rewardkit` server process from checkout ``root`` on a free port; (process, base URL)."""
    cmd = [sys.executable, "-c", "import conftest; from rewardkit.cli.app import main; main()", *args]
    env = dict(os.environ, REWARDKIT_REWARD_API_KEY=KEY, REWARDKIT_JUDGE_API_KEY=KEY, PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    deadline = time.monotonic() + 120
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        lines.append(line)
        m = re.search(r"(http://127\.0\.0\.1:\d+)", line)
        if m:
            threading.Thread(target=proc.stdout.read, daemon=True).start()  # type: ignore[union-attr]
            return proc, m.group(1)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError("server did not start: " + "".join(lines)[-2000:])


def client(request, seconds: float, timeout: float = 5.0) -> dict:
    """A legitimate client: one request after another, each on a new connection, for ``seconds``."""
    ok, statuses, latencies = 0, {}, []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.perf_counter()
        try:
            with httpx.Client(timeout=timeout) as c:
                r = request(c)
            status = str(r.status_code)
        except httpx.TimeoutException:
            status = "timeout"
        except httpx.TransportError as e:
            status = type(e).__name__
        dt = time.perf_counter() - t
        statuses[status] = statuses.get(status, 0) + 1
        if status == "200":
            ok += 1
            latencies.append(dt)
        else:
            time.sleep(0.05)
    n = sum(statuses.values())
    return {"requests": n, "ok": ok, "ok_rate": ok / n if n else None, "statuses": statuses,
            "median_latency_ms": round(1000 * statistics.median(latencies), 1) if latencies else None,
            "max_latency_ms": round(1000 * max(latencies), 1) if latencies else None}


def phase(port: int, request, seconds: float, idle: int = 0, stalled: bytes | None = None, n_stalled: int = 0) -> dict:
    flood = Flood(port, idle or n_stalled, stalled) if (idle or n_stalled) else None
    if flood:
        flood.start()
        end = time.monotonic() + 10
        while flood.peak < flood.n and time.monotonic() < end:  # let it fill (bounded wait)
            time.sleep(0.05)
    res = client(request, seconds)
    if flood:
        flood.stop.set()
        flood.join(timeout=10)
        res["flood"] = {"sockets": flood.n, "peak_open": flood.peak, "opened": flood.opened,
                        "closed_by_server": flood.closed_by_server}
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server-ref", default=None, help="flood the servers of this commit (default: this checkout)")
    ap.add_argument("--seconds", type=float, default=20.0, help="length of each flood phase")
    ap.add_argument("--idle", type=int, default=1000, help="idle attacker sockets (at most 1000)")
    ap.add_argument("--stalled", type=int, default=300, help="stalled-body attacker requests (at most 300)")
    ap.add_argument("--out", default="server_flood", help="results name under benchmarks/results")
    a = ap.parse_args()
    idle, n_stalled = min(a.idle, 1000), min(a.stalled, 300)
    with checkout(a.server_ref) as root:
        run(a, root, idle, n_stalled)


def run(a: argparse.Namespace, root: Path, idle: int, n_stalled: int) -> None:
    commit = a.server_ref or subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                                            text=True).stdout.strip()
    auth = {"Authorization": f"Bearer {KEY}"}
    results: dict = {"server_root_commit": commit, "seconds": a.seconds, "machine": machine(), "servers": {}}

    reward_body = {"query": ["Q: 1+1? A: \\boxed{2}"], "prompts": ["Q: 1+1?"], "labels": ["2"]}
    proc, url = start_server(root, ["serve", "--scorer", "verifier", "--port", "0"])
    stalled = (f"POST /get_reward HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
               f"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"query\": ").encode()
    port = int(url.rsplit(":", 1)[1])
    post = lambda c: c.post(f"{url}/get_reward", json=reward_body, headers=auth)  # noqa: E731
    try:
        results["servers"]["serve"] = {
            "baseline": phase(port, post, min(5.0, a.seconds)),
            "idle_flood": phase(port, post, a.seconds, idle=idle),
            "stalled_bodies": phase(port, post, a.seconds, stalled=stalled, n_stalled=n_stalled),
        }
    finally:
        proc.kill()
        proc.wait()
    # serve-judge over an HTTP judge that is never called: /v1/models does no model work
    proc, url = start_server(root, ["serve-judge", "http://127.0.0.1:9/v1", "--model-name", "judge", "--port", "0"])
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    get = lambda c: c.get(f"http://{HOST}:{port}/v1/models", headers=auth)  # noqa: E731
    try:
        results["servers"]["serve-judge"] = {
            "baseline": phase(port, get, min(5.0, a.seconds)),
            "idle_flood": phase(port, get, a.seconds, idle=idle),
        }
    finally:
        proc.kill()
        proc.wait()

    how = f" --server-ref {a.server_ref} --out {a.out}" if a.server_ref else ""
    lines = [f"# Connection floods on loopback (server checkout {commit})", "",
             f"`python benchmarks/server_flood.py --seconds {a.seconds:g}{how}`: "
             f"a legitimate client (key, new connection per request, 5 s timeout) for {a.seconds:g} s per flood "
             f"while an attacker on 127.0.0.1 holds {idle} idle sockets (reopening every one the server closes) or "
             f"{n_stalled} requests with complete headers and a stalled body. Baseline: the same client, no flood, "
             "same process.", "",
             "| server | phase | requests | served (200) | rate | median latency (ms) | other outcomes | attacker sockets closed by the server |",
             "|---|---|---|---|---|---|---|---|"]
    for name, phases in results["servers"].items():
        for ph, r in phases.items():
            other = ", ".join(f"{k}: {v}" for k, v in sorted(r["statuses"].items()) if k != "200") or "-"
            fl = r.get("flood", {}).get("closed_by_server", "-")
            rate = "-" if r["ok_rate"] is None else f"{r['ok_rate']:.0%}"
            lines.append(f"| `{name}` | {ph.replace('_', ' ')} | {r['requests']} | {r['ok']} | {rate} | "
                         f"{r['median_latency_ms'] or '-'} | {other} | {fl} |")
    lines += ["", f"Machine: {results['machine']['cpus']} CPUs (shared), Python {results['machine']['python']}; "
              "client, attacker and server share the cores."]
    write_results(a.out.rsplit("/", 1)[-1], results, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
