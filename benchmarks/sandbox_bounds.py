"""What one hostile program can take from the host under the code verifier's sandbox limits: memory over
many processes (each under its own limit), disk over many files (each under the per-file limit), disk through
a user and mount namespace of its own (``unshare -Urm``, then a private tmpfs), and what ``grade()`` answers for
a memory balloon whose processes outlive the test's time limit.

    python benchmarks/sandbox_bounds.py                                   # this checkout, ~2 minutes
    python benchmarks/sandbox_bounds.py --code-ref 07d8b58 --out sandbox_bounds_before

Each program runs through ``rewardkit.code.sandbox.run_sandboxed`` with the limits ``code.execution.grade``
uses (its ``GradeConfig`` defaults) in the checked-out code. The memory taken is the peak of a memory cgroup
(no limit) that holds the whole measurement, the sandbox included, so other users of a shared machine do
not count (where no cgroup can be made: the host's ``MemAvailable`` drop, sampled every 20 ms); the disk
taken is the drop in free space of the file system that holds sandbox working directories, sampled every
20 ms. Bounded by construction: 6 processes of at most ``--mib`` MiB each, files written for at most 6 s
and at most 2 GiB.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import checkout, machine, write_results  # noqa: E402

from rewardkit.code.sandbox import remove_cgroup  # noqa: E402
from rewardkit.code.sandbox_stage import memory_cgroup, mount_points  # noqa: E402

MEMORY = """
import os, sys, time
want = {mib} << 20
r, w = os.pipe()
for _ in range(6):
    if os.fork() == 0:
        got, chunks = 0, []
        try:
            while got < want:
                chunks.append(b"x" * (16 << 20))  # written, so resident
                got += 16 << 20
        except MemoryError:
            pass
        os.write(w, b"%d\\n" % got)
        time.sleep(2.0)
        os._exit(0)
os.close(w)
got = [int(x) for x in os.fdopen(r).read().split()]
codes = [os.wait()[1] for _ in range(6)]
print({{"per_process_mib": [g >> 20 for g in got], "killed": sum(c != 0 for c in codes)}})
"""

DISK = """
import time
end, written, err = time.monotonic() + 6.0, 0, None
try:
    i = 0
    while time.monotonic() < end and written < (2 << 30):
        with open(f"f{{i}}", "wb") as f:
            f.write(b"x" * (15 << 20))  # each file under the 16 MiB per-file limit
        written += 15 << 20
        i += 1
except OSError as e:
    err = e.strerror
print({{"written_mib": written >> 20, "stopped_by": err}})
"""

NESTED = """
import subprocess
script = ("mount -t tmpfs none /tmp && i=0; while [ $i -lt 40 ]; do head -c 15000000 /dev/zero > /tmp/f$i || break; "
          "i=$((i+1)); done; du -sm /tmp | cut -f1")  # 40 files of 15 MB (each under the per-file limit)
r = subprocess.run(["unshare", "-Urm", "/bin/sh", "-c", script], capture_output=True, text=True)
print({{"written_mib": int(r.stdout.strip() or 0), "stopped_by": r.stderr.strip()[-100:] or None}})
"""

# a memory balloon whose survivors outlive the test's time limit, graded as code.execution.grade() does
BALLOON = """
import os, time
def add(a, b):
    for _ in range(4):
        if os.fork() == 0:
            hog = b'x' * (300 << 20)
            time.sleep(60)
            os._exit(0)
    for _ in range(4):
        os.wait()
    return a + b
"""
GRADER = """
import json, sys
from rewardkit.code.execution import GradeConfig, Problem, grade
add = Problem("add", "humaneval", prompt="def add(a, b):\\n", entry_point="add",
              test="def check(candidate):\\n    assert candidate(2, 3) == 5\\n")
r = grade(add, sys.stdin.read(), GradeConfig(timeout=10))
print(json.dumps({{"code": int(r.results[0]), "reason": r.reason}}))
"""

# the limits code.execution.grade() passes to the sandbox, read from the checked-out code's GradeConfig
RUNNER = """
import ast, json, sys
from rewardkit.code.execution import GradeConfig
from rewardkit.code.sandbox import Limits, python_paths, run_sandboxed
cfg = GradeConfig()
extra = {{k: getattr(cfg, k) for k in ("program_memory_bytes", "disk_bytes") if hasattr(cfg, k)}}
limits = Limits(cpu_seconds=30, wall_seconds=30, memory_bytes=cfg.memory_bytes,
                processes=getattr(cfg, "processes", 64), **extra)
r = run_sandboxed([sys.executable, "-I", "-c", sys.stdin.read()], readonly_paths=python_paths(), limits=limits)
line = r.stdout.decode().strip().splitlines()
print(json.dumps({{"program": ast.literal_eval(line[-1]) if line else None, "stderr": r.stderr.decode()[-300:],
                  "limits": {{k: getattr(limits, k) for k in ("memory_bytes", "processes", "file_bytes", *extra)}},
                  "memory_bound": getattr(r, "memory_bound", "rlimit"), "disk_bound": getattr(r, "disk_bound", "file"),
                  "isolation": r.isolation_used, "user_namespaces": getattr(r, "user_namespaces", "allowed")}}))
"""


def _meminfo_available() -> int:
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) << 10 for line in f if line.startswith("MemAvailable:"))


def _join_accounting_cgroup() -> None:
    """In the measured child, before exec: a memory cgroup of its own with no limit, to read its peak."""
    memory_cgroup(1 << 60)


def _peak(pid: int) -> tuple[str | None, int | None]:
    """(the cgroup ``pid`` is in, if ours, and its peak usage reader's path)."""
    with open(f"/proc/{pid}/cgroup") as f:
        rows = [ln.rstrip("\n").split(":", 2) for ln in f]
    for key, rel in ((k, r) for _, k, r in rows):
        if "rewardkit-sandbox-" not in rel:
            continue
        points = mount_points("cgroup2") if key == "" else mount_points("cgroup", "memory")
        if key == "" or "memory" in key.split(","):
            return points[0] + rel, None
    return None, None


def _read_peak(path: str) -> int | None:
    for name in ("memory.peak", "memory.max_usage_in_bytes"):
        try:
            return int(Path(path, name).read_text())
        except (OSError, ValueError):
            continue
    return None


def measure(root: Path, program: str) -> dict:
    """Run ``program`` under the checked-out code's limits: the memory the whole run took (its cgroup's peak,
    else the host's largest drop in available memory) and the largest drop in free disk space."""
    tmp = Path(tempfile.gettempdir())
    base_mem, base_disk = _meminfo_available(), shutil.disk_usage(tmp).free
    drops = {"memory": 0, "disk": 0}
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            drops["memory"] = max(drops["memory"], base_mem - _meminfo_available())
            drops["disk"] = max(drops["disk"], base_disk - shutil.disk_usage(tmp).free)
            time.sleep(0.02)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", RUNNER.format()], cwd=root, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_join_accounting_cgroup)
    cgroup, _ = _peak(proc.pid)
    stdout, stderr = proc.communicate(program, timeout=300)
    r = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    stop.set()
    t.join()
    peak = _read_peak(cgroup) if cgroup else None
    if cgroup:
        remove_cgroup(cgroup)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-2000:])
    out = json.loads(r.stdout)
    out.update(seconds=round(time.perf_counter() - t0, 1), host_disk_drop_mib=drops["disk"] >> 20,
               memory_taken_mib=(peak if peak is not None else drops["memory"]) >> 20,
               memory_measured_by="cgroup peak" if peak is not None else "MemAvailable drop")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--code-ref", default=None, help="measure the sandbox of this commit (default: this checkout)")
    ap.add_argument("--mib", type=int, default=600, help="memory each of the 6 processes tries to take (<= 900)")
    ap.add_argument("--out", default="sandbox_bounds", help="results name under benchmarks/results")
    a = ap.parse_args()
    mib = min(a.mib, 900)
    with checkout(a.code_ref) as root:
        commit = a.code_ref or subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                                              text=True).stdout.strip()
        mem = measure(root, MEMORY.format(mib=mib))
        disk = measure(root, DISK.format())
        nested = measure(root, NESTED.format())
        t0 = time.perf_counter()
        graded = subprocess.run([sys.executable, "-c", GRADER.format()], cwd=root, input=BALLOON, text=True,
                                capture_output=True, timeout=300)
        if graded.returncode != 0:
            raise RuntimeError(graded.stderr[-2000:])
        balloon = {**json.loads(graded.stdout), "seconds": round(time.perf_counter() - t0, 1)}
    res = {"code": commit, "machine": machine(), "mib_per_process": mib, "memory": mem, "disk": disk,
           "nested_namespace_tmpfs": nested, "memory_balloon_grade": balloon}
    how = f" --code-ref {a.code_ref} --out {a.out}" if a.code_ref else ""
    lim = mem["limits"]
    prog_mem = lim.get("program_memory_bytes")
    lines = [f"# Sandbox bounds on one program (code {commit})", "",
             f"`python benchmarks/sandbox_bounds.py --mib {mib}{how}`: the code verifier's limits (its `GradeConfig` "
             f"defaults: {lim['memory_bytes'] >> 20} MiB address space per process, {lim['processes']} processes"
             + (f", {prog_mem >> 20} MiB for all processes together" if prog_mem else "")
             + (f", {lim['disk_bytes'] >> 20} MiB of files together" if lim.get("disk_bytes") else "")
             + f"; {lim['file_bytes'] >> 20} MiB per file). Memory and disk measured from outside the sandbox (see the note below).", "",
             "| program | what it got | memory taken (MiB) | host disk taken (MiB) | bound that held | seconds |",
             "|---|---|---|---|---|---|",
             f"| 6 processes x {mib} MiB | {sum(mem['program']['per_process_mib'])} MiB "
             f"({'+'.join(map(str, mem['program']['per_process_mib']))}), {mem['program']['killed']} killed | "
             f"{mem['memory_taken_mib']} | {mem['host_disk_drop_mib']} | {mem['memory_bound']} | {mem['seconds']} |",
             f"| 15 MiB files for 6 s | {disk['program']['written_mib']} MiB written"
             f"{', then ' + disk['program']['stopped_by'] if disk['program']['stopped_by'] else ''} | "
             f"{disk['memory_taken_mib']} | {disk['host_disk_drop_mib']} | {disk['disk_bound']} "
             f"({disk['isolation']}) | {disk['seconds']} |",
             f"| `unshare -Urm`, its own tmpfs over /tmp, 15 MB files | {nested['program']['written_mib']} MiB written"
             f"{', then ' + nested['program']['stopped_by'] if nested['program']['stopped_by'] else ''} | "
             f"{nested['memory_taken_mib']} | {nested['host_disk_drop_mib']} | new user namespaces: "
             f"{nested['user_namespaces']} | {nested['seconds']} |", "",
             f"A memory balloon graded by `grade()` (4 processes x 300 MiB, the survivors of the OOM kill wait past "
             f"the test's 10 s limit): code {balloon['code']}, \"{balloon['reason']}\" ({balloon['seconds']} s).", "",
             f"Machine: {res['machine']['cpus']} CPUs (shared), Python {res['machine']['python']}. Memory taken: "
             f"{mem['memory_measured_by']} of the whole measured run (sandbox stage and Python included). Disk: free "
             "space sampled, so other users' writes may show. A tmpfs working directory holds its files in memory: "
             "they count in the program's memory cgroup too."]
    write_results(a.out, res, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
