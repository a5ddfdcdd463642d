"""``lean --json --stdin`` in ``rewardkit.code.sandbox``: clean environment, read-only toolchain, no network,
wall-clock timeout (kills everything it started), memory limit, heartbeat option; and toolchain discovery
with errors that say where we looked and what to configure."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rewardkit.code.sandbox import MINIMAL_PATH, Limits, run_sandboxed
from rewardkit.jury.lean.check import INIT_MISSING, LeanMessage, LeanRun, require_settings, unwritable

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
        p = shutil.which(explicit) or (explicit if os.path.isfile(explicit) and os.access(explicit, os.X_OK) else None)
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
    if elan.is_file() and os.access(elan, os.X_OK):
        return str(elan)
    looked.append(f"{elan} ({'not an executable file' if elan.exists() else 'missing'})")
    raise LeanToolchainError("no Lean 4 toolchain found. Looked in: " + "; ".join(looked) + ".\n" + CONFIGURE_HELP)


def parse_json_lines(stdout: str) -> tuple[list[LeanMessage], list[str]]:
    """Messages from ``lean --json`` output (one JSON object per line; lines not opening with ``{`` ignored),
    and the lines that open like a message but are not one: a check with one is inconclusive, since the
    message it lost could have been an error."""
    out, bad = [], []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(LeanMessage.from_json(json.loads(line)))
            except (ValueError, KeyError, TypeError, AttributeError):
                bad.append(line)
    return out, bad


def lake_lean_path(project: str | Path) -> list[str]:
    """The ``LEAN_PATH`` that ``lake env`` sets for a built Lake project: its own and its packages' build
    library folders (``.lake/build/lib/lean``; older Lake: ``build/lib``, ``lake-packages/*/build/lib``)."""
    root = Path(project)
    found = [root / ".lake" / "build" / "lib" / "lean", root / "build" / "lib"]
    found += sorted(root.glob(".lake/packages/*/.lake/build/lib/lean")) + sorted(root.glob("lake-packages/*/build/lib"))
    return [str(p) for p in found if p.is_dir()]


class LeanSubprocess:
    """Checks each source with a fresh ``lean --json --stdin`` process inside ``rewardkit.code.sandbox``.

    The process gets a clean environment (``PATH`` and ``LEAN_PATH`` plus ``env``), a fresh working
    directory, no network, a read-only view of the toolchain and library folders (namespaces where the
    kernel allows them), rlimits, and a wall-clock deadline that kills everything it started (status
    timeout). ``timeout`` is that deadline in seconds (300); ``memory_mb`` caps the address space (RLIMIT_AS;
    Mathlib maps several GB of .olean files, so leave room); ``max_heartbeats`` passes
    ``-D maxHeartbeats=N`` (Lean's deterministic elaboration bound); ``workers`` processes run in parallel.
    ``cwd`` is a built Lake project whose libraries Lean may import (its ``LEAN_PATH`` is derived unless
    ``LEAN_PATH`` is set in ``env`` or the environment). Submissions with ``#eval`` and other commands are
    refused before Lean runs (``check.build_source``); the sandbox bounds what Lean itself can do.
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
        isolation: str = "auto",
    ):
        require_settings("LeanSubprocess", "number", timeout=timeout, memory_mb=memory_mb)
        require_settings("LeanSubprocess", "count", workers=workers)
        require_settings("LeanSubprocess", "count0", max_heartbeats=max_heartbeats)  # Lean reads 0 as no bound
        self.exe = find_lean(lean)
        self.timeout, self.memory_mb, self.max_heartbeats = timeout, memory_mb, max_heartbeats
        self.cwd, self.env, self.workers, self.isolation = cwd, env, workers, isolation
        lean_path = (env or {}).get("LEAN_PATH") or os.environ.get("LEAN_PATH")
        self.lean_path = lean_path.split(os.pathsep) if lean_path else (lake_lean_path(cwd) if cwd else [])
        self.exe, prefix = _real_lean(self.exe, cwd)
        self.readonly = [prefix] + [p for p in self.lean_path if p] + ([cwd] if cwd else [])
        if probe:
            self.probe()

    def probe(self) -> None:
        """Fail loudly now if ``lean`` exists but cannot check an empty file: its core library missing, or a check
        that does not finish (the sandbox refusing it, an option lean rejects), which would leave every proof
        inconclusive."""
        run = self.run("")
        if run.error and INIT_MISSING in run.error or any(INIT_MISSING in m.data for m in run.messages):
            raise LeanToolchainError(
                f"`lean` exists at {self.exe} but cannot find its core library (Init): "
                f"\"unknown module prefix 'Init'\". The toolchain is incomplete (no Init.olean under its "
                f"lib/lean); reinstall it with elan or point LEAN_EXE at a complete toolchain.\n{CONFIGURE_HELP}"
            )
        if run.status != "ok":
            raise LeanToolchainError(f"`lean` at {self.exe} could not check an empty file ({run.status}): "
                                     f"{run.error}\n{CONFIGURE_HELP}")

    def command(self) -> list[str]:
        cmd = [self.exe, "--json", "--stdin"]
        if self.max_heartbeats is not None:
            cmd += ["-D", f"maxHeartbeats={self.max_heartbeats}"]
        return cmd

    def limits(self) -> Limits:
        """The sandbox limits of one check: the wall deadline, generous CPU (the deadline on every core: Lean is
        multi-threaded), the address space (``memory_mb``, else 64 GiB), 64 MiB per file and of output, 512
        processes, 4096 open files."""
        memory = (self.memory_mb or 64 * 1024) * 2**20  # Lean's threads share one address space
        return Limits(cpu_seconds=self.timeout * max(1, os.cpu_count() or 1), wall_seconds=self.timeout,
                      memory_bytes=memory, program_memory_bytes=memory, file_bytes=64 << 20, processes=512,
                      open_files=4096, output_bytes=64 << 20)

    def run(self, source: str) -> LeanRun:
        refused = unwritable(source)
        if refused is not None:  # no UTF-8 text to give lean: this source's check fails, not the whole batch
            return refused
        t0 = time.perf_counter()
        env = {"PATH": f"{os.path.dirname(self.exe)}:{MINIMAL_PATH}", **(self.env or {})}
        if self.lean_path:
            env["LEAN_PATH"] = os.pathsep.join(self.lean_path)
        res = run_sandboxed(self.command(), stdin=source.encode("utf-8"), limits=self.limits(), env=env,
                            readonly_paths=self.readonly, network=False, isolation=self.isolation)  # type: ignore[arg-type]
        dt = time.perf_counter() - t0
        if res.error:
            return LeanRun(status="error", error=f"could not run {self.exe} in the sandbox: {res.error}", seconds=dt)
        if res.timed_out or res.cpu_exceeded:
            return LeanRun(status="timeout", error=f"lean exceeded {self.timeout:g}s; killed with every process it "
                                                   "started", seconds=dt)
        out, err = res.stdout.decode("utf-8", "replace"), res.stderr.decode("utf-8", "replace")
        msgs, bad = parse_json_lines(out)
        if res.output_truncated:
            return LeanRun(msgs, "error", "lean wrote more output than the sandbox keeps; killed", dt)
        if INIT_MISSING in err or INIT_MISSING in out:
            return LeanRun(msgs, "error", f"lean cannot load its core library: {INIT_MISSING}", dt)
        has_error = any(m.severity == "error" for m in msgs)
        if res.signal is not None:
            why = " (memory limit?)" if self.memory_mb else ""
            return LeanRun(msgs, "error", f"lean killed by signal {res.signal}{why}", dt)
        if res.returncode not in (0, 1) or (res.returncode == 1 and not has_error):
            return LeanRun(msgs, "error", f"lean exited {res.returncode} without a Lean error: {err.strip()[-500:]}", dt)
        if bad:
            return LeanRun(msgs, "error", f"{self.exe} --json printed {len(bad)} line(s) that are not a Lean "
                                          f"message, first: {bad[0][:200]!r}", dt)
        return LeanRun(msgs, "ok", None, dt)

    def run_many(self, sources: Sequence[str]) -> list[LeanRun]:
        if self.workers <= 1 or len(sources) <= 1:
            return [self.run(s) for s in sources]
        with ThreadPoolExecutor(self.workers) as ex:
            return list(ex.map(self.run, sources))

    def close(self) -> None:
        pass


def _real_lean(exe: str, cwd: str | None) -> tuple[str, str]:
    """(the toolchain's own ``lean``, its prefix): an elan proxy is resolved with ``lean --print-prefix``
    (run in ``cwd``, so the project's ``lean-toolchain`` decides), since the sandbox hides ``~/.elan``."""
    real = os.path.realpath(exe)
    try:
        p = subprocess.run([exe, "--print-prefix"], capture_output=True, text=True, cwd=cwd, timeout=60)
        prefix = p.stdout.strip().splitlines()[-1] if p.returncode == 0 and p.stdout.strip() else ""
    except (OSError, subprocess.SubprocessError):
        prefix = ""
    if prefix and os.access(os.path.join(prefix, "bin", "lean"), os.X_OK):
        return os.path.join(prefix, "bin", "lean"), prefix
    return real, os.path.dirname(os.path.dirname(real))
