"""A persistent leanprover-community/repl process: the header (imports) once per environment, then each
proof as ``{"cmd": ..., "env": n}``; restarted on timeout (the REPL has no per-command timeout), when its
memory grows past a limit, or after a number of commands.

The REPL is a long-lived interactive process, so it does not run in ``rewardkit.code.sandbox`` (one-shot runs);
it gets a clean environment and its own session. ``check_proofs`` refuses ``#eval`` and every other command
in a submission before any backend sees it; for untrusted input at scale prefer ``LeanSubprocess`` or a
Kimina server in its own container."""

from __future__ import annotations

import json
import os
import select
import shlex
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rewardkit.jury.lean.check import LeanMessage, LeanRun, require_settings, split_header, unwritable


def _group_rss_mb(pgid: int) -> float:
    """Resident memory of every process in a process group (the REPL may run under `lake exe`)."""
    total = 0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[2]) != pgid:
                continue
            for line in (d / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1024


def clean_env(extra: dict[str, str] | None) -> dict[str, str]:
    """What a REPL under ``lake exe`` needs from our environment (PATH, HOME, elan and Lean paths) plus
    ``extra``; credentials and everything else stay out."""
    keep = ("PATH", "HOME", "ELAN_HOME", "LEAN_PATH", "LEAN_SYSROOT", "LAKE_HOME", "LANG", "LC_ALL")
    return {**{k: os.environ[k] for k in keep if k in os.environ}, **(extra or {})}


class LeanRepl:
    """Checks sources in one long-lived REPL process (``cmd``, e.g. ``["lake", "exe", "repl"]``): each proof
    within ``timeout`` seconds (300), a header within ``header_timeout`` (600: importing Mathlib is slow)."""

    name = "lean-repl"

    def __init__(
        self,
        cmd: str | Sequence[str],
        *,
        cwd: str | None = None,
        timeout: float = 300.0,
        header_timeout: float = 600.0,
        max_rss_mb: float | None = None,
        max_commands: int | None = None,
        env: dict[str, str] | None = None,
    ):
        require_settings("LeanRepl", "number", timeout=timeout, header_timeout=header_timeout, max_rss_mb=max_rss_mb)
        require_settings("LeanRepl", "count", max_commands=max_commands)
        self.cmd = shlex.split(cmd) if isinstance(cmd, str) else list(cmd)
        self.cwd, self.env = cwd, env
        self.timeout, self.header_timeout = timeout, header_timeout
        self.max_rss_mb, self.max_commands = max_rss_mb, max_commands
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self._buf = b""
        self._envs: dict[str, int] = {}
        self._commands = 0

    # -- process
    def _start(self) -> None:
        try:
            self.proc = subprocess.Popen(
                self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                cwd=self.cwd, env=clean_env(self.env), start_new_session=True,
            )
        except OSError as e:  # no such program, not executable, no such cwd: each check inconclusive, named
            raise RuntimeError(f"REPL {shlex.join(self.cmd)} could not start: {e}") from e

    def _live(self) -> None:
        """A running REPL before a command picks its environment: one that died is cleared (with the environments
        it knew) and a fresh one started."""
        if self.proc is not None and self.proc.poll() is not None:
            self._kill()
        if self.proc is None:
            self._start()

    def _kill(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout):
                if f:
                    try:
                        f.close()
                    except OSError:  # a request left unwritten in a pipe nobody reads (BrokenPipeError)
                        pass
            self.proc = None
        self._buf, self._envs, self._commands = b"", {}, 0  # a fresh REPL knows no environment

    def restart(self) -> None:
        """Kill the REPL; the next command starts a fresh one (a REPL that cannot start then fails that command)."""
        self._kill()
        self.restarts += 1

    def close(self) -> None:
        self._kill()

    def __del__(self) -> None:  # best effort
        try:
            self._kill()
        except Exception:
            pass

    # -- protocol
    def _send(self, req: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """Write one request (JSON + blank line) to the running REPL; read until a blank line; None on timeout."""
        assert self.proc and self.proc.stdin and self.proc.stdout
        fd = self.proc.stdout.fileno()
        while select.select([fd], [], [], 0)[0]:  # what came after the last answer would be read as this one's
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            self._buf += chunk
        if self._buf.strip():
            raise RuntimeError(f"REPL {shlex.join(self.cmd)} wrote output that answers no request: "
                               f"{self._buf[:200].decode('utf-8', 'replace')!r}")
        try:
            self.proc.stdin.write((json.dumps(req, ensure_ascii=False) + "\n\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError as e:
            raise RuntimeError(f"REPL {shlex.join(self.cmd)} exited") from e
        deadline = time.monotonic() + timeout
        while True:
            text = self._buf.lstrip(b"\r\n")
            cut = text.find(b"\n\n")
            if cut >= 0:
                self._buf = text[cut + 2:]
                try:
                    resp = json.loads(text[:cut])
                except ValueError:
                    resp = None
                if not isinstance(resp, dict):
                    raise RuntimeError(f"REPL {shlex.join(self.cmd)} answered with something other than a JSON "
                                       f"object: {text[:cut][:200].decode('utf-8', 'replace')!r}")
                return resp
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise RuntimeError(f"REPL {shlex.join(self.cmd)} exited")
                self._buf += chunk

    def _env_for(self, header: str) -> int | LeanRun:
        if header in self._envs:
            return self._envs[header]
        resp = self._send({"cmd": header}, self.header_timeout)
        if resp is None:
            self.restart()
            return LeanRun(status="timeout", error=f"REPL header took over {self.header_timeout:g}s")
        if "env" not in resp:
            return LeanRun(status="error", error=f"REPL rejected the header: {resp.get('message', resp)}")
        bad = [m for m in map(LeanMessage.from_json, resp.get("messages", [])) if m.severity == "error"]
        if bad:
            return LeanRun(bad, "error", "header failed: " + bad[0].data)
        self._envs[header] = int(resp["env"])
        return self._envs[header]

    def run(self, source: str) -> LeanRun:
        refused = unwritable(source)
        if refused is not None:  # refused before writing: the REPL is fine and keeps its environments
            return refused
        t0 = time.perf_counter()
        header, body = split_header(source)
        try:
            self._live()
            env = self._env_for(header)
            if isinstance(env, LeanRun):
                return env
            resp = self._send({"cmd": body, "env": env}, self.timeout)
            dt = time.perf_counter() - t0
            if resp is None:
                self.restart()
                return LeanRun(status="timeout", error=f"REPL command exceeded {self.timeout:g}s; REPL restarted",
                               seconds=dt)
            self._commands += 1
            if "env" not in resp and "message" not in resp:  # the REPL answers a command with one or the other
                raise ValueError(f"an answer with neither 'env' nor 'message': {json.dumps(resp)[:200]}")
            run = LeanRun.from_repl(resp, header.count("\n"), dt, "REPL")  # lines of the whole source
        except (TypeError, ValueError, AttributeError, KeyError) as e:  # a message or field of the wrong shape
            self.restart()
            return LeanRun(status="error", error=f"REPL {shlex.join(self.cmd)} answered a malformed response "
                                                 f"({type(e).__name__}: {e}); REPL restarted",
                           seconds=time.perf_counter() - t0)
        except RuntimeError as e:
            self.restart()
            return LeanRun(status="error", error=str(e), seconds=time.perf_counter() - t0)
        self._maybe_recycle()
        return run

    def _maybe_recycle(self) -> None:
        if self.max_commands is not None and self._commands >= self.max_commands:
            self.restart()
        elif self.max_rss_mb is not None and self.proc is not None and _group_rss_mb(self.proc.pid) > self.max_rss_mb:
            self.restart()

    def run_many(self, sources: Sequence[str]) -> list[LeanRun]:
        return [self.run(s) for s in sources]
