"""``lean --json --stdin`` as a subprocess: wall-clock timeout (kills the process group), memory limit,
heartbeat option; and toolchain discovery with errors that say where we looked and what to configure."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rewardkit.lean.check import INIT_MISSING, LeanMessage, LeanRun

CONFIGURE_HELP = (
    "Configure one of:\n"
    "  - a toolchain: install elan (https://github.com/leanprover/elan), make a Lake project that depends on\n"
    "    Mathlib and build it, then set LEAN_EXE=/path/to/lean (or pass lean=...) and run from that project\n"
    "    (cwd=...) so `import Mathlib` resolves (LEAN_PATH, or `lake env`);\n"
    "  - a REPL: leanprover-community/repl built in that project: LeanRepl(['lake', 'exe', 'repl'], cwd=project)\n"
    "    or lean='repl:lake exe repl';\n"
    "  - a Kimina Lean Server: KiminaClient('http://host:8000') or lean='http://host:8000' (KIMINA_URL,\n"
    "    KIMINA_API_KEY)."
)


class LeanToolchainError(RuntimeError):
    """No usable Lean toolchain (not found, or found without its core library)."""


def find_lean(explicit: str | None = None) -> str:
    """The ``lean`` executable: ``explicit``, else ``$LEAN_EXE``, else ``lean`` on PATH, else ``~/.elan/bin/lean``."""
    looked = []
    if explicit:
        p = shutil.which(explicit) or (explicit if os.access(explicit, os.X_OK) else None)
        if p:
            return p
        raise LeanToolchainError(f"lean executable {explicit!r} does not exist or is not executable.\n{CONFIGURE_HELP}")
    env = os.environ.get("LEAN_EXE")
    if env:
        if os.access(env, os.X_OK) and os.path.isfile(env):
            return env
        looked.append(f"LEAN_EXE={env!r} (not an executable file)")
    else:
        looked.append("LEAN_EXE (unset)")
    on_path = shutil.which("lean")
    if on_path:
        return on_path
    looked.append("PATH (no `lean`)")
    elan = Path.home() / ".elan" / "bin" / "lean"
    if os.access(elan, os.X_OK):
        return str(elan)
    looked.append(f"{elan} (missing)")
    raise LeanToolchainError("no Lean 4 toolchain found. Looked in: " + "; ".join(looked) + ".\n" + CONFIGURE_HELP)


def parse_json_lines(stdout: str) -> list[LeanMessage]:
    """Messages from ``lean --json`` output (one JSON object per line; other lines ignored)."""
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(LeanMessage.from_json(json.loads(line)))
            except (ValueError, KeyError, TypeError):
                continue
    return out


class LeanSubprocess:
    """Checks each source with a fresh ``lean --json --stdin`` process.

    ``timeout`` is wall-clock seconds (the whole process group is killed on overrun: status timeout);
    ``memory_mb`` caps the address space (RLIMIT_AS); ``max_heartbeats`` passes ``-D maxHeartbeats=N``
    (Lean's deterministic elaboration bound); ``workers`` processes run in parallel.
    """

    name = "lean-subprocess"

    def __init__(
        self,
        lean: str | None = None,
        *,
        timeout: float = 300.0,
        memory_mb: int | None = None,
        max_heartbeats: int | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        workers: int = 1,
        probe: bool = True,
    ):
        self.exe = find_lean(lean)
        self.timeout, self.memory_mb, self.max_heartbeats = timeout, memory_mb, max_heartbeats
        self.cwd, self.env, self.workers = cwd, env, workers
        if probe:
            self.probe()

    def probe(self) -> None:
        """Fail loudly now if ``lean`` exists but cannot load its core library."""
        run = self.run("")
        if run.error and INIT_MISSING in run.error or any(INIT_MISSING in m.data for m in run.messages):
            raise LeanToolchainError(
                f"`lean` exists at {self.exe} but cannot find its core library (Init): "
                f"\"unknown module prefix 'Init'\". The toolchain is incomplete (no Init.olean under its "
                f"lib/lean); reinstall it with elan or point LEAN_EXE at a complete toolchain.\n{CONFIGURE_HELP}"
            )

    def command(self) -> list[str]:
        cmd = [self.exe, "--json", "--stdin"]
        if self.max_heartbeats is not None:
            cmd += ["-D", f"maxHeartbeats={self.max_heartbeats}"]
        return cmd

    def _limits(self) -> None:  # runs in the child before exec
        if self.memory_mb:
            b = self.memory_mb * 2**20
            resource.setrlimit(resource.RLIMIT_AS, (b, b))

    def run(self, source: str) -> LeanRun:
        t0 = time.perf_counter()
        env = {**os.environ, **(self.env or {})}
        try:
            proc = subprocess.Popen(
                self.command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                cwd=self.cwd, env=env, text=True, encoding="utf-8", start_new_session=True,
                preexec_fn=self._limits if self.memory_mb else None,
            )
        except OSError as e:
            return LeanRun(status="error", error=f"could not start {self.exe}: {e}", seconds=time.perf_counter() - t0)
        try:
            out, err = proc.communicate(source, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
            return LeanRun(status="timeout", error=f"lean exceeded {self.timeout:g}s wall clock; process group killed",
                           seconds=time.perf_counter() - t0)
        dt = time.perf_counter() - t0
        msgs = parse_json_lines(out)
        if INIT_MISSING in err or INIT_MISSING in out:
            return LeanRun(msgs, "error", f"lean cannot load its core library: {INIT_MISSING}", dt)
        has_error = any(m.severity == "error" for m in msgs)
        if proc.returncode < 0:
            why = " (memory limit?)" if self.memory_mb else ""
            return LeanRun(msgs, "error", f"lean killed by signal {-proc.returncode}{why}", dt)
        if proc.returncode not in (0, 1) or (proc.returncode == 1 and not has_error):
            return LeanRun(msgs, "error", f"lean exited {proc.returncode} without a Lean error: {err.strip()[-500:]}", dt)
        return LeanRun(msgs, "ok", None, dt)

    def run_many(self, sources: Sequence[str]) -> list[LeanRun]:
        if self.workers <= 1 or len(sources) <= 1:
            return [self.run(s) for s in sources]
        with ThreadPoolExecutor(self.workers) as ex:
            return list(ex.map(self.run, sources))

    def close(self) -> None:
        pass
