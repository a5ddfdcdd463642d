"""The test harness that runs inside the sandbox (stdlib only; also imported for its value codec).

It never runs the program in its own process: the program runs in a forked child that holds no secret
and no handle to the harness's stdout (the only result channel). The harness makes itself non-dumpable
(no ptrace, no /proc/<pid>/mem or fd access for same-uid processes), reads the tests only after forking
the call server, reads the per-run nonce only after every test has run, and prints one JSON record with
that nonce. Expected outputs of stdin and functional tests never enter the sandbox: the parent compares.

stdin framing: ``len\\n{program part}len\\n{tests part}NONCE\\n`` (exact byte reads, nothing buffered ahead).
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import select
import signal
import sys
import time
import traceback

MAX_MESSAGE = 64 << 20


# ------------------------------------------------------------------------------------- value codec


def encode(x, depth: int = 0):
    """Plain Python data -> JSON with tags for what JSON lacks (tuple, set, dict keys, float specials)."""
    if depth > 200:
        raise ValueError("value nested too deeply")
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return {"f": repr(float(x))}
    if isinstance(x, list):
        return [encode(v, depth + 1) for v in x]
    if isinstance(x, tuple):
        return {"t": [encode(v, depth + 1) for v in x]}
    if isinstance(x, (set, frozenset)):
        return {"s" if isinstance(x, set) else "F": [encode(v, depth + 1) for v in x]}
    if isinstance(x, dict):
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in x.items()]}
    if isinstance(x, (bytes, bytearray)):
        return {"b": bytes(x).hex()}
    if isinstance(x, complex):
        return {"c": [repr(x.real), repr(x.imag)]}
    if hasattr(x, "tolist") and callable(x.tolist):  # numpy scalars and arrays
        return encode(x.tolist(), depth + 1)
    raise TypeError(f"a value of type {type(x).__name__} cannot be passed across the sandbox")


def decode(x, depth: int = 0):
    """The inverse of ``encode``; rejects anything else (the input may come from hostile code)."""
    if depth > 200:
        raise ValueError("value nested too deeply")
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if isinstance(x, list):
        return [decode(v, depth + 1) for v in x]
    if isinstance(x, dict) and len(x) == 1:
        (tag, v), = x.items()
        if tag == "f" and isinstance(v, str):
            return float(v)
        if tag == "t" and isinstance(v, list):
            return tuple(decode(e, depth + 1) for e in v)
        if tag == "s" and isinstance(v, list):
            return {decode(e, depth + 1) for e in v}
        if tag == "F" and isinstance(v, list):
            return frozenset(decode(e, depth + 1) for e in v)
        if tag == "d" and isinstance(v, list):
            return {decode(k, depth + 1): decode(w, depth + 1) for k, w in v}
        if tag == "b" and isinstance(v, str):
            return bytes.fromhex(v)
        if tag == "c" and isinstance(v, list) and len(v) == 2:
            return complex(float(v[0]), float(v[1]))
    raise ValueError(f"malformed encoded value {str(x)[:100]!r}")


# ----------------------------------------------------------------------------------------- framing


def _read_exact(fd: int, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = os.read(fd, n - len(out))
        if not chunk:
            raise EOFError("stdin ended early")
        out += chunk
    return bytes(out)


def _read_part(fd: int) -> dict:
    head = bytearray()
    while not head.endswith(b"\n"):
        head += _read_exact(fd, 1)
    return json.loads(_read_exact(fd, int(head)))


def _send(fd: int, obj, deadline: float | None = None) -> None:
    data = json.dumps(obj).encode()
    data = len(data).to_bytes(8, "big") + data
    while data:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                raise TimeoutError
        data = data[os.write(fd, data[:65536]):]


def _recv(fd: int, deadline: float | None = None):
    """One framed message, or None at EOF; TimeoutError past the deadline."""
    def exact(n: int) -> bytes | None:
        out = bytearray()
        while len(out) < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([fd], [], [], left)[0]:
                    raise TimeoutError
            chunk = os.read(fd, min(n - len(out), 1 << 20))
            if not chunk:
                return None
            out += chunk
        return bytes(out)
    head = exact(8)
    if head is None:
        return None
    n = int.from_bytes(head, "big")
    if n > MAX_MESSAGE:
        raise ValueError(f"message of {n} bytes")
    body = exact(n)
    return None if body is None else json.loads(body)


def _exc(e: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(e), e)).strip()[-2000:]


def _isolate(keep: set[int], stdin_fd: int | None) -> None:
    """In a child, before any program code: stdin from ``stdin_fd`` (or nothing), stdout -> stderr, and
    every other descriptor (the harness's stdin with the tests and nonce, its stdout) closed."""
    if stdin_fd is None:
        stdin_fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(stdin_fd, 0)
    os.dup2(2, 1)
    for fd in range(3, 1024):
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115


# ------------------------------------------------------------------------------------- call server


def _kill_tree(pid: int) -> None:
    """SIGKILL a child and its process group (whatever of it setsid'd away dies with the sandbox)."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass


class CandidateError(BaseException):
    """The program raised (or crashed) during a call; BaseException so test code cannot swallow it."""


class CandidateTimeout(BaseException):
    pass


class Server:
    """The program loaded once in a forked child that answers calls ``fn(*args)`` over pipes."""

    def __init__(self, prog: dict):
        req_r, self.req_w = os.pipe()
        self.resp_r, resp_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.setpgid(0, 0)
            _isolate({req_r, resp_w}, None)
            _serve(prog, req_r, resp_w)
        os.close(req_r)
        os.close(resp_w)
        self.dead = False

    def start(self, deadline: float) -> dict | None:
        """Wait for the program to load: None when ready, else the failed test's record (-3 or -4)."""
        try:
            msg = _recv(self.resp_r, deadline)
        except TimeoutError:
            self.kill()
            return {"code": -3, "reason": "time limit exceeded while loading the program"}
        except (ValueError, OSError) as e:
            msg = {"load_error": f"malformed message from the program: {e}"}
        if msg is None or "load_error" in msg or msg.get("ready") is not True:
            self.kill()
            why = (msg or {}).get("load_error") or "the program exited while loading"
            return {"code": -4, "reason": f"the program failed to load: {why}"}
        return None

    def call(self, args: list, deadline: float):
        if self.dead:
            raise CandidateError("the program is no longer running")
        try:
            _send(self.req_w, {"args": encode(args)}, deadline)
            msg = _recv(self.resp_r, deadline)
        except TimeoutError:
            self.kill()
            raise CandidateTimeout("time limit exceeded") from None
        except (ValueError, OSError) as e:
            self.kill()
            raise CandidateError(f"bad reply from the program: {e}") from None
        if msg is None:
            self.kill()
            raise CandidateError("the program exited during a call")
        if "exc" in msg:
            raise CandidateError(str(msg["exc"]))
        try:
            return decode(msg["ok"])
        except (KeyError, TypeError, ValueError) as e:
            raise CandidateError(f"bad reply from the program: {e}") from None

    def kill(self) -> None:
        self.dead = True
        _kill_tree(self.pid)
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def _serve(prog: dict, req_r: int, resp_w: int) -> None:
    """Child: load the program, then answer calls until the harness closes the pipe. A harness gone (killed by
    the program, or its pipe closed) ends the child in silence: a traceback of the harness's own code on
    stderr would stand where the run's reason quotes the end of the program's stderr."""
    try:
        _answer_calls(prog, req_r, resp_w)
    except OSError:
        pass
    os._exit(0)


def _answer_calls(prog: dict, req_r: int, resp_w: int) -> None:
    ns = {"__name__": "program", "__builtins__": __builtins__}
    try:
        exec(compile(prog["prelude"] + prog["source"], "<program>", "exec"), ns)  # noqa: S102
        fn = _resolve(ns, prog["function"])
        _send(resp_w, {"ready": True})
    except BaseException as e:  # noqa: BLE001
        _send(resp_w, {"load_error": _exc(e)})
        return
    while True:
        req = _recv(req_r)
        if req is None:
            return
        try:
            msg = {"ok": encode(fn(*decode(req["args"])))}
        except BaseException as e:  # noqa: BLE001
            msg = {"exc": _exc(e)}
        _send(resp_w, msg)


def _resolve(ns: dict, name: str):
    if "Solution" in ns and isinstance(ns["Solution"], type) and hasattr(ns["Solution"], name):
        return getattr(ns["Solution"](), name)  # LeetCode style, as LiveCodeBench does
    if name not in ns or not callable(ns[name]):
        raise NameError(f"the program defines no function {name!r}")
    return ns[name]


# ------------------------------------------------------------------------------------------- test kinds


def run_humaneval(prog: dict, server: Server, tests: dict) -> list[dict]:
    """``check(candidate)`` in this process, with the candidate answering from the sandboxed child."""
    deadline = time.monotonic() + tests["timeout"]
    failed = server.start(deadline)
    if failed:
        return [failed]
    failures: list[BaseException] = []

    def candidate(*args):
        try:
            return server.call(list(args), deadline)
        except (CandidateError, CandidateTimeout) as e:
            failures.append(e)
            raise

    ns: dict = {"__name__": "__check__"}
    try:
        exec(tests["prompt"], ns)  # noqa: S102 - the dataset's helpers (e.g. poly), not the program's
        ns[prog["function"]] = candidate  # tests may call the entry point by name (HumanEval/33)
        exec(tests["test"], ns)  # noqa: S102
        check = ns["check"]
    except BaseException as e:  # noqa: BLE001
        return [{"code": -5, "reason": f"the test code itself failed: {_exc(e)}"}]

    def on_alarm(*_):
        raise CandidateTimeout("time limit exceeded (test code)")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, max(deadline - time.monotonic(), 0.001))
    try:
        check(candidate)
        err = None
    except BaseException as e:  # noqa: BLE001
        err = e
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    err = failures[0] if failures else err  # a swallowed candidate failure still counts
    if err is None:
        return [{"code": 1}]
    if isinstance(err, CandidateTimeout):
        return [{"code": -3, "reason": str(err)}]
    if isinstance(err, CandidateError):
        return [{"code": -4, "reason": str(err)}]
    return [{"code": -2, "reason": _exc(err) if str(err) or not isinstance(err, AssertionError)
             else "AssertionError: a test assertion failed"}]


def run_functional(prog: dict, server: Server, tests: dict) -> list[dict]:
    """LiveCodeBench call-based tests: each input line is one JSON argument; the parent compares."""
    out = []
    t = tests["timeout"]
    failed = server.start(time.monotonic() + t)
    if failed:
        return [failed]
    for raw in tests["inputs"]:
        try:
            args = [json.loads(line) for line in raw.split("\n")]
        except ValueError as e:
            out.append({"code": -5, "reason": f"test input is not JSON lines: {e}"})
            break
        try:
            out.append({"value": encode(server.call(args, time.monotonic() + t))})
        except CandidateTimeout as e:
            out.append({"code": -3, "reason": str(e)})
        except CandidateError as e:
            out.append({"code": -4, "reason": str(e)})
        if "code" in out[-1] and (tests["stop"] or server.dead):
            break
    return out


def run_stdin(prog: dict, tests: dict) -> list[dict]:
    """LiveCodeBench stdin tests: a fresh child per input, its stdout returned for the parent to compare."""
    out = []
    try:
        code = compile(prog["prelude"] + prog["source"], "<program>", "exec")
    except BaseException as e:  # noqa: BLE001
        return [{"code": -4, "reason": f"the program does not compile: {_exc(e)}"}]
    for raw in tests["inputs"]:
        out.append(_one_stdin(code, raw, tests["timeout"], tests["max_output"]))
        if "code" in out[-1] and tests["stop"]:
            break
    return out


def _one_stdin(code, raw: str, timeout: float, max_output: int) -> dict:
    fd_in = os.memfd_create("input")
    os.write(fd_in, raw.encode())
    os.lseek(fd_in, 0, os.SEEK_SET)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)
        _isolate({w}, fd_in)
        os.dup2(w, 1)
        os.close(w)
        ns = {"__name__": "__main__", "__builtins__": __builtins__}
        status = 0
        try:
            exec(code, ns)  # noqa: S102
        except SystemExit:
            pass  # as LiveCodeBench: exit() ends the program normally
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
            status = 1
        try:
            sys.stdout.flush()
        except BaseException:  # noqa: BLE001
            status = 1
        os._exit(status)
    os.close(fd_in)
    os.close(w)
    deadline = time.monotonic() + timeout
    buf = bytearray()
    result: dict | None = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            result = {"code": -3, "reason": "time limit exceeded"}
            break
        if not select.select([r], [], [], left)[0]:
            continue
        chunk = os.read(r, 65536)
        if not chunk:
            break
        buf += chunk
        if len(buf) > max_output:
            result = {"code": -4, "reason": f"output limit exceeded ({max_output} bytes)"}
            break
    os.close(r)
    _kill_tree(pid)
    _, st = os.waitpid(pid, 0)
    if result is not None:
        return result
    if os.WIFSIGNALED(st):
        return {"code": -4, "reason": f"killed by signal {os.WTERMSIG(st)}"}
    if os.WEXITSTATUS(st) != 0:
        return {"code": -4, "reason": f"runtime error (exit status {os.WEXITSTATUS(st)})"}
    # base64, not text: the record's size is then 4/3 of the output whatever it holds (JSON escapes a control
    # character or non-ASCII text to 6 bytes a character), so the parent can cap the record exactly
    return {"stdout_b64": base64.b64encode(bytes(buf)).decode("ascii")}


def main() -> None:
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0: same-uid processes cannot inspect us
    # the working directory is the program's: a module it writes there must never shadow one the test code imports
    here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != here]
    prog = _read_part(0)
    server = Server(prog) if prog["kind"] in ("humaneval", "functional") else None
    tests = _read_part(0)
    try:
        if prog["kind"] == "humaneval":
            results = run_humaneval(prog, server, tests)
        elif prog["kind"] == "functional":
            results = run_functional(prog, server, tests)
        else:
            results = run_stdin(prog, tests)
    except Exception:  # noqa: BLE001 - a harness bug: say so (runner error), never blame the program
        results = [{"code": -5, "reason": "harness error: " + traceback.format_exc()[-1500:]}]
    if server is not None:
        server.kill()
    nonce = _read_exact(0, 33).decode().strip()  # read only now: no child ever had it in memory
    sys.stdout.write(json.dumps({"nonce": nonce, "results": results}) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
