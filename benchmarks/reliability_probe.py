"""Reliability probe (issue 31's secrets, refused jobs, failed components and body bursts), re-run on demand.

Bounded and local-only: servers on 127.0.0.1, files under a temporary folder (plus, for the `/dev/stdout`
target, a check that no `/dev/stdout.lock` appears; one left by older code is removed again). What it counts:

- secrets: for each user-part form httpx accepts (an e-mail login, '@', ':' and spaces in a password, ...), a
  real upstream judge on 127.0.0.1 and the scoring job, serve-judge and the CLI in front of it: forms whose
  login or password shows in the manifest, the rows, the CLI's error line, a log record, serve-judge's
  `/v1/models`, a completion or an error body; forms whose Basic auth differs from what httpx itself sends;
  `/v1/models` ids that carry the upstream's address;
- refused jobs: `--out` targets the job must refuse (foreign, empty, device, FIFO, links, another job's output,
  a foreign side file or lock, bad records, a missing folder), and those after which the folder differs;
  finished jobs that leave `OUT.lock`; SIGKILLs of the real CLI, each leaving a stale lock that must not block
  the next run, and the final run's lock and rows;
- components: responses with a status other than ok whose row still carries a component value;
- bursts: serve-judge at its defaults, 500 clients at once, each request (headers and a ~100-byte body) sent
  in one write: answers by status (503 with Retry-After past the 256 work slots is by design; 408 is not);
- Lean gate (issue 35): submissions that hide code after the theorem (a raw string in an `s!` interpolation, a
  raw string with 300 `#`, the nine commands missing from the old deny-list at column 0 and indented, commands
  no list holds, attributes in `let rec`/`where`, doc comments, tabs, invisible characters): how many the gate
  lets through to Lean, and how many of its refusals name a line and column; and real proof shapes (calc,
  match, bullets, `<;>`, term mode, an indented `where`, raw strings in interpolations) it refuses.

    python benchmarks/reliability_probe.py                        # this checkout (about 2 minutes)
    python benchmarks/reliability_probe.py --ref 15e4d57 --out reliability_probe_before   # the code before
    python benchmarks/reliability_probe.py --parts lean --out reliability_probe_lean   # one part only
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MARKER, LOGIN = "S3cretMarker42", "L0ginMarker7"
FORMS = {
    "user and password": f"{LOGIN}:{MARKER}",
    "e-mail login": f"me.{LOGIN}@corp.com:{MARKER}",
    "'@' in the password": f"alice{LOGIN}:{MARKER}@REST{MARKER}",
    "space in the password": f"alice{LOGIN}:{MARKER} two words{MARKER}",
    "login, '@' and space at once": f"me{LOGIN}@corp.com:p@ss {MARKER} w@rd",
    "':' in the password": f"u{LOGIN}:{MARKER}:{MARKER}",
    "a bare token": f"{MARKER}",
    "an empty login": f":{MARKER}",
    "an empty password": f"{LOGIN}:",
    "percent-encoded": f"{LOGIN}%40x:{MARKER}%20%3A%2F",
    "brackets, quotes, backslash": f"u{LOGIN}:{MARKER}[]'\"\\|^`{{}}<>;=,!$&*+~",
    "non-ASCII": f"ü{LOGIN}:é{MARKER}ß",
}
CLI = [sys.executable, "-c", "import conftest; from rewardkit.cli.app import main; main()"]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            self.lines.append(record.getMessage())


def recording_judge(seen: list):
    """An OpenAI-compatible judge on ``make_app`` that records the Authorization header of every request; a
    chat whose last message is ``FAIL`` gets a 500 (for the error-body checks)."""
    from rewardkit.http_server import Route, make_app

    def models(req):
        seen.append(req.headers.get("authorization"))
        return {"object": "list", "data": [{"id": "upstream-judge", "object": "model"}]}

    def chat(req):
        seen.append(req.headers.get("authorization"))
        if req.body["messages"][-1]["content"] == "FAIL":
            return 500, {"error": {"message": "upstream broke", "type": "server_error"}}
        return {"id": "x", "object": "chat.completion", "model": "upstream-judge",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "Score: \\boxed{7}"},
                             "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}

    return make_app([Route("GET", "/v1/models", models), Route("POST", "/v1/chat/completions", chat)])


def secrets(work: Path) -> dict:
    """Per URL form: where its login or password showed, and whether the judge got httpx's own credentials."""
    import httpx
    from rewardkit.cli.app import app
    from typer.testing import CliRunner

    from rewardkit.backends.http import HTTPBackend
    from rewardkit.backends.server import JudgeServer
    from rewardkit.http_server import BackgroundServer
    from rewardkit.runtime.jobs import score_file
    from rewardkit.scoring import get_scorer

    out: dict[str, dict] = {}
    rec = _Records()
    root = logging.getLogger()
    old_level = root.level
    root.setLevel(logging.DEBUG)
    for name, info in FORMS.items():
        seen: list = []
        shown: dict[str, str] = {}
        res: dict = {}
        with BackgroundServer(recording_judge(seen)) as up:
            url = f"http://{info}@127.0.0.1:{up.url.rsplit(':', 1)[1]}/v1"
            httpx.get(url + "/models", timeout=20)  # httpx's own request: the reference credentials
            reference = seen.pop() if seen else None
            root.addHandler(rec)
            rec.lines.clear()
            try:
                spec = f"{url}?retries=0&timeout=20"
                d = work / f"secrets-{len(out)}"
                d.mkdir()
                inp = d / "in.jsonl"
                inp.write_text(json.dumps({"id": "g", "problem": "1+1?", "answer": "2", "responses": ["2", "3"]}) + "\n")
                try:
                    score_file(inp, get_scorer("pointwise", judge=spec), d / "scores.jsonl", options={"judge": spec})
                except Exception as e:  # noqa: BLE001 - the probe records what happened
                    shown["job error"] = f"{type(e).__name__}: {e}"
                shown["files"] = "\n".join(p.read_text("utf-8", "replace") for p in sorted(d.iterdir()) if p.is_file())
                r = CliRunner().invoke(app, ["score", str(inp), "--scorer", "pointwise", "--out", str(d / "o2.jsonl"),
                                             "--judge", spec, "--device", "cpu"])
                shown["CLI error line"] = r.output
                try:
                    backend = HTTPBackend(url, retries=0, timeout=20)
                except Exception as e:  # noqa: BLE001
                    shown["backend error"] = f"{type(e).__name__}: {e}"
                    backend = None
                if backend is not None:
                    with JudgeServer(backend, port=0) as srv:
                        models = httpx.get(srv.url + "/models", timeout=20)
                        ok = httpx.post(srv.url + "/chat/completions", timeout=60,
                                        json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
                        bad = httpx.post(srv.url + "/chat/completions", timeout=60,
                                         json={"messages": [{"role": "user", "content": "FAIL"}], "max_tokens": 4})
                    shown.update({"/v1/models": models.text, "completion": ok.text, "error body": bad.text})
                    res["served_model_id"] = models.json()["data"][0]["id"]
                    res["model_id_holds_upstream_address"] = "127.0.0.1" in models.json()["data"][0]["id"]
            finally:
                root.removeHandler(rec)
            shown["log records"] = "\n".join(rec.lines)
        res["shown_in"] = sorted(k for k, v in shown.items() if MARKER in v or LOGIN in v)
        res["password_shown_in"] = sorted(k for k, v in shown.items() if MARKER in v)
        res["judge_got_httpx_credentials"] = bool(seen) and reference is not None and set(seen) == {reference}
        res["requests_at_judge"] = len(seen)
        out[name] = res
    root.setLevel(old_level)
    return {"forms": out, "forms_tried": len(out), "forms_leaking": sum(bool(r["shown_in"]) for r in out.values()),
            "forms_leaking_the_password": sum(bool(r["password_shown_in"]) for r in out.values()),
            "forms_with_other_credentials": sum(not r["judge_got_httpx_credentials"] for r in out.values()),
            "model_ids_with_upstream_address": sum(bool(r.get("model_id_holds_upstream_address")) for r in out.values())}


# issue 35: spec forms that fell through to the local-model path or echoed a query-string secret
SPEC_FORMS = {
    "mixed-case scheme HTTP://": f"HTTP://{LOGIN}:{MARKER}@127.0.0.1:{{port}}/v1",
    "Https://": f"Https://{LOGIN}:{MARKER}@127.0.0.1:{{port}}/v1",
    "hf: before a URL": f"hf:http://{LOGIN}:{MARKER}@127.0.0.1:{{port}}/v1",
    "one slash http:/": f"http:/{LOGIN}:{MARKER}@127.0.0.1:{{port}}/v1",
    "no scheme u:pw@host/v1": f"{LOGIN}:{MARKER}@127.0.0.1:{{port}}/v1",
    "no scheme, a space in the password": f"{LOGIN}:p {MARKER}@127.0.0.1:{{port}}/v1",
    "'?' in the password": f"http://{LOGIN}:ss?{MARKER}@127.0.0.1:{{port}}/v1",
    "?api%5Fkey=": f"http://127.0.0.1:{{port}}/v1?api%5Fkey={MARKER}",
    "?auth_token=": f"http://127.0.0.1:{{port}}/v1?timeout=20&auth_token={MARKER}",
    "?api-key=": f"http://127.0.0.1:{{port}}/v1?api-key={MARKER}",
    "a bare ?TOKEN": f"http://127.0.0.1:{{port}}/v1?{MARKER}",
}
GUARD_FORMS = {  # forms the code before issue 35 already masked: guards for the same paths
    "vllm: before a URL": f"vllm:http://{LOGIN}:{MARKER}@127.0.0.1:{{port}}/v1",
    "openai: before a mixed-case URL": f"openai:judge@hTTp://{LOGIN}:{MARKER}@127.0.0.1:{{port}}/v1",
    "#access_token=": f"http://127.0.0.1:{{port}}/v1#access_token={MARKER}",
}


def _cli(args: list, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """The CLI of the checkout under test (cwd's conftest maps cli/ and evals/), as a real subprocess."""
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd or os.getcwd(), env=env)


def _server_output(args: list, request) -> str:
    """Start a server command; once it listens, send it ``request(url)`` (a list of bodies), then stop it:
    everything it printed and every body it answered."""
    proc = subprocess.Popen([*CLI, *map(str, args)], cwd=os.getcwd(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=dict(os.environ, PYTHONPATH=os.getcwd()))
    shown = []
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break  # it exited: refused
            shown.append(line)
            if line.startswith("serving"):
                url = line.split(" at ")[-1].split()[0].removesuffix("/get_reward")
                with contextlib.suppress(Exception):
                    shown += request(url)
                break
    finally:
        proc.terminate()
        shown.append(proc.communicate(timeout=60)[0])
    return "".join(shown)


def _judge_requests(url: str) -> list[str]:
    import httpx

    return [httpx.get(url + "/models", timeout=60).text,
            httpx.post(url + "/chat/completions", timeout=120,
                       json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}).text]


def _reward_requests(url: str) -> list[str]:
    import httpx

    body = {"query": ["1+1? \\boxed{2}"], "prompts": ["1+1? "], "labels": ["2"]}
    return [httpx.post(url + "/get_reward", json=body, timeout=120).text]


def spec_form_outputs(spec: str, work: Path) -> dict[str, str]:
    """What every command that takes a judge spec shows and writes for ``spec`` (real subprocesses, at once):
    score, eval generate, eval verifier (stdout, stderr, exit), serve-judge and serve (their output and the
    bodies of one request each when they listen), and every file written under ``work``."""
    from concurrent.futures import ThreadPoolExecutor

    inp = work / "in.jsonl"
    inp.write_text(json.dumps({"id": "g", "problem": "1+1?", "answer": "2", "responses": ["\\boxed{2}", "3"],
                               "correct": [True, False]}) + "\n")
    out = work / "out"
    out.mkdir()

    def shown(r: subprocess.CompletedProcess) -> str:
        return f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"

    jobs = {
        "score": lambda: shown(_cli(["score", inp, "-s", "pointwise", "--judge", spec, "--out", out / "s.jsonl"])),
        "eval generate": lambda: shown(_cli(["eval", "generate", spec, "gsm8k", "--limit", "1", "--n", "1",
                                             "--max-tokens", "8", "--out", out / "g.jsonl"])),
        "eval verifier": lambda: shown(_cli(["eval", "verifier", inp, "-s", "pointwise", "--judge", spec,
                                             "--out", out / "ev"])),
        "serve-judge": lambda: _server_output(["serve-judge", spec, "--port", "0"], _judge_requests),
        "serve": lambda: _server_output(["serve", "-s", "pointwise", "--judge", spec, "--port", "0"],
                                        _reward_requests),
    }
    with ThreadPoolExecutor(len(jobs)) as pool:
        res = dict(zip(jobs, pool.map(lambda job: job(), jobs.values())))
    res["files"] = "\n".join(p.read_bytes().decode("utf-8", "replace") for p in sorted(out.rglob("*")) if p.is_file())
    return res


def spec_forms(work: Path) -> dict:
    """Per spec form of ``SPEC_FORMS`` and ``GUARD_FORMS``: the commands and files where its login or password
    showed."""
    from rewardkit.http_server import BackgroundServer

    forms = {}
    with BackgroundServer(recording_judge([])) as up:
        port = up.url.rsplit(":", 1)[1]
        for k, (name, form) in enumerate({**SPEC_FORMS, **GUARD_FORMS}.items()):
            d = work / f"spec-form-{k}"
            d.mkdir()
            shown = spec_form_outputs(form.format(port=port), d)
            forms[name] = sorted(w for w, text in shown.items() if MARKER in text or LOGIN in text)
    return {"forms": forms, "forms_tried": len(forms), "forms_leaking": sum(bool(v) for v in forms.values()),
            "commands": ["score", "eval generate", "eval verifier", "serve-judge", "serve"]}


def outputs(work: Path) -> dict:
    """``eval generate`` on a file no rewardkit job wrote (issue 35's repro), and ``--out nd1/x/`` (a path that
    names a missing folder) for score and eval generate: exit codes, and what changed in the folder."""
    from rewardkit.http_server import BackgroundServer

    res: dict = {}
    mine = b'{"id": "mine-1", "note": "my data"}\n{"id": "mine-2", "note": "last, no newline"}'
    with BackgroundServer(recording_judge([])) as up:
        d = work / "outputs-generate"
        d.mkdir()
        (d / "mine.jsonl").write_bytes(mine)
        before = listing(d)
        r = _cli(["eval", "generate", up.url + "/v1", "gsm8k", "--limit", "1", "--n", "1", "--out", "mine.jsonl"], d)
        res["generate_on_a_users_file"] = {"exit": r.returncode, "byte_identical": (d / "mine.jsonl").read_bytes() == mine,
                                           "folder_unchanged": listing(d) == before, "stderr": r.stderr[-300:]}
        for cmd in ("score", "eval generate"):
            d = work / f"outputs-folder-{cmd.replace(' ', '-')}"
            d.mkdir()
            inp = _groups(d / "in.jsonl", "ab")
            before = listing(d)
            args = ["score", inp] if cmd == "score" else ["eval", "generate", up.url + "/v1", "gsm8k", "--limit", "1",
                                                         "--n", "1"]
            r = _cli([*args, "--out", "nd1/x/"], d)
            res[f"{cmd}_out_names_a_folder"] = {
                "exit": r.returncode, "folder_unchanged": listing(d) == before, "file_x_written": (d / "nd1" / "x").is_file(),
                "error_lines": sum(x.startswith("error: ") for x in r.stderr.splitlines())}
    return res


class _Scripted:
    name = "scripted"

    def score(self, groups):
        from rewardkit.types import GroupScore, Status

        return [GroupScore(g.id, [float("good" in r) for r in g.responses], [Status.OK] * len(g)) for g in groups]


def listing(folder: Path) -> list:
    """Every path under ``folder`` with its kind, size and link target: what a refused job must not change."""
    return [(str(p.relative_to(folder)), stat.S_IFMT(os.lstat(p).st_mode), os.lstat(p).st_size,
             os.readlink(p) if p.is_symlink() else None) for p in sorted(folder.rglob("*"))]


def _groups(path: Path, ids: str) -> Path:
    path.write_text("".join(json.dumps({"id": i, "prompt": f"p {i}", "responses": ["good", "bad"]}) + "\n" for i in ids))
    return path


REFUSED_TARGETS = ["foreign file", "empty file", "fifo", "null device", "link to a fifo", "link to a regular file",
                   "link to a rewardkit output", "another job's output", "foreign side file", "foreign lock",
                   "all records bad", "missing folder, all records bad"]


def refused_target(d: Path, what: str) -> tuple[Path, Path]:
    """(input, out) in folder ``d`` such that a job must be refused because of ``what`` (one of
    ``REFUSED_TARGETS``; the null device needs root)."""
    from rewardkit.runtime.jobs import lock_path, rejects_path, score_file

    inp, out = _groups(d / "in.jsonl", "abc"), d / "out.jsonl"
    if what == "foreign file":
        out.write_text("my notes\n")
    elif what == "empty file":
        out.write_bytes(b"")
    elif what == "fifo":
        os.mkfifo(out)
    elif what == "null device":
        os.mknod(out, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    elif what == "link to a fifo":
        os.mkfifo(d / "pipe")
        out.symlink_to(d / "pipe")
    elif what == "link to a regular file":
        (d / "notes.txt").write_text("x\n")
        out.symlink_to(d / "notes.txt")
    elif what == "link to a rewardkit output":
        score_file(_groups(d / "other.jsonl", "xy"), _Scripted(), d / "real.jsonl")
        lock_path(d / "real.jsonl").unlink(missing_ok=True)  # older code leaves it: not what is probed here
        out.symlink_to(d / "real.jsonl")
    elif what == "another job's output":
        score_file(_groups(d / "other.jsonl", "xy"), _Scripted(), out)
        lock_path(out).unlink(missing_ok=True)
    elif what == "foreign side file":
        rejects_path(out).write_text("notes\n")
    elif what == "foreign lock":
        lock_path(out).write_text("my lock\n")
    elif what == "all records bad":
        inp.write_text("{bad\n")
    elif what == "missing folder, all records bad":
        inp.write_text("{bad\n")
        out = d / "new" / "deeper" / "out.jsonl"
    return inp, out


def refused_jobs(work: Path) -> dict:
    """Targets the job must refuse: which changed the folder; then locks after finished and killed jobs."""
    from rewardkit.runtime.jobs import JobError, lock_path, score_file

    kinds = [k for k in REFUSED_TARGETS if k != "null device" or os.geteuid() == 0]
    changed, refused = [], 0
    for k, what in enumerate(kinds):
        d = work / f"refused-{k}"
        d.mkdir()
        inp, out = refused_target(d, what)
        before = listing(d)
        try:
            score_file(inp, _Scripted(), out, skip_bad=True)
        except JobError:
            refused += 1
        if listing(d) != before:
            changed.append(what)
    stdout_lock = Path("/dev/stdout.lock")
    existed = stdout_lock.exists()
    d = work / "dev-stdout"
    d.mkdir()
    try:
        score_file(_groups(d / "in.jsonl", "a"), _Scripted(), "/dev/stdout")
    except JobError:
        refused += 1
    dev_lock_created = stdout_lock.exists() and not existed
    if dev_lock_created:
        stdout_lock.unlink()  # what older code left in /dev
    kinds.append("/dev/stdout")
    if dev_lock_created:
        changed.append("/dev/stdout")

    d = work / "finished"
    d.mkdir()
    left = 0
    for k in range(5):
        out = d / f"o{k}.jsonl"
        score_file(_groups(d / "in.jsonl", "abcd"), _Scripted(), out)
        left += lock_path(out).exists()
    return {"targets": kinds, "refused": refused, "changed_the_folder": changed,
            "finished_jobs": 5, "finished_jobs_leaving_the_lock": left, **_kills(work)}


def _kills(work: Path, kills: int = 4) -> dict:
    """SIGKILL the real CLI mid-run ``kills`` times, then finish: stale locks seen, runs blocked, the end."""
    sys.path.insert(0, str(HERE))
    from rewardkit.evals.data import rollouts_path
    from score_soak import synthetic_groups

    from rewardkit.runtime.jobs import lock_path

    d = work / "kills"
    d.mkdir()
    inp = d / "groups.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in synthetic_groups(rollouts_path(), 200)))
    out = d / "out.jsonl"
    cmd = [*CLI, "score", str(inp), "--out", str(out), "--batch-size", "2"]
    stale, blocked = 0, 0
    for _ in range(kills):
        proc = subprocess.Popen(cmd, cwd=Path.cwd(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        start = out.read_bytes().count(b"\n") if out.exists() else 0
        deadline = time.time() + 120
        while proc.poll() is None and time.time() < deadline and (
                not out.exists() or out.read_bytes().count(b"\n") < start + 20):
            time.sleep(0.01)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        blocked += "another rewardkit job" in (err or "")
        stale += lock_path(out).exists()
    r = subprocess.run(cmd, cwd=Path.cwd(), capture_output=True, text=True, timeout=600)
    ids = [json.loads(x)["id"] for x in out.read_text().splitlines()]
    return {"kills": kills, "stale_locks_after_kills": stale, "runs_blocked_by_a_stale_lock": blocked,
            "final_run_exit": r.returncode, "final_rows": len(ids), "final_duplicates": len(ids) - len(set(ids)),
            "lock_after_final_run": lock_path(out).exists()}


def components(work: Path) -> dict:
    """A job over responses holding lone surrogates: non-ok responses whose row keeps a component value."""
    from rewardkit.runtime.jobs import score_file
    from rewardkit.scoring import get_scorer

    inp = work / "surrogates.jsonl"
    rows = [{"id": f"g{k}", "problem": "1+1", "answer": "2",
             "responses": ["\\boxed{2}", f"x{chr(0xD800 + k)} \\boxed{{2}}", "\\boxed{3}"]} for k in range(20)]
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = work / "surrogates.out.jsonl"
    score_file(inp, get_scorer("verifier", timeout=60.0), out)
    non_ok = with_value = 0
    for r in (json.loads(x) for x in out.read_text().splitlines()):
        for i, s in enumerate(r["statuses"]):
            if s != "ok":
                non_ok += 1
                with_value += any(v[i] is not None for v in (r.get("components") or {}).values())
    return {"non_ok_responses": non_ok, "non_ok_with_a_component_value": with_value}


def split_bursts() -> dict:
    """Issue 35: the same bursts from clients that write headers and body apart (httpx's way)."""
    return bursts(split=True)


def bursts(n_bursts: int = 5, clients: int = 500, split: bool = False) -> dict:
    """serve-judge at its defaults over a scripted judge: ``n_bursts`` bursts of ``clients`` one-write requests."""
    sys.path.insert(0, str(HERE))
    from server_flood import one_write_burst, post_request

    from rewardkit.backends.server import JudgeServer
    from rewardkit.testing import ScriptedJudge

    body = json.dumps({"messages": [{"role": "user", "content": "Say hi, judge, in a word or two."}],
                       "max_tokens": 4}).encode()
    totals: dict[str, int] = {}
    per = []
    with JudgeServer(ScriptedJudge(reply="hi"), port=0, max_connections=1000) as srv:
        port = int(srv.url.rsplit(":", 1)[1].split("/")[0])
        for _ in range(n_bursts):
            got = one_write_burst(port, post_request("/v1/chat/completions", body), clients, split=split)
            per.append(got)
            for k, v in got.items():
                totals[k] = totals.get(k, 0) + v
    return {"bursts": n_bursts, "clients_per_burst": clients, "body_bytes": len(body), "answers": totals,
            "per_burst": per}


LEAN_STATEMENT = "theorem test_problem (x : ℕ) (h : x + 1 = 2) : x = 1 :="
NINE_COMMANDS = ["simproc", "dsimproc", "notation3", "binder_predicate", "unif_hint", "init_quot", "grind_pattern",
                 "gen_injective_theorems%", "variable?"]
LEAN_ATTACKS = {
    "issue 35: s!\"{r\"\\\"}\" ++ r\"\\\" then #eval": ' by\n  have := s!"{r"\\"}" ++ r"\\"\n  omega\n#eval IO.println "}"\n',
    "raw string with 300 #, then #eval": (" by\n  have := r" + "#" * 300 + '"\\"' + "#" * 300
                                          + '\n  omega\n#eval IO.println "x" -- "\n'),
    **{f"{w} at column 0": f" by\n  omega\n{w} foo\n" for w in NINE_COMMANDS},
    **{f"{w} indented": f" by\n  omega\n  {w} foo\n" for w in NINE_COMMANDS},
    "an unknown command at column 0": " by\n  omega\nfrobnicate_cmd foo\n",
    "let rec @[implemented_by ...]": " by\n  let rec @[implemented_by pwn] f : ℕ → ℕ := id\n  omega\n",
    "where @[extern ...]": ' by\n  omega\n  where @[extern "system"] f : ℕ → ℕ := id\n',
    "a module doc (a command) in the proof": " by\n  omega\n  /-! doc -/\n",
    "a tab before a command": " by\n  omega\n\tfrobnicate_cmd foo\n",
    "a no-break space before a command": " by\n  omega\n  \u00a0frobnicate_cmd foo\n",
}
LEAN_PROOFS = [
    " by\n  have h₁ : x = 1 := by\n    omega\n  -- the key step: #eval in a comment\n  exact h₁\n",
    " by\n  calc x = (x + 1) - 1 := by omega\n    _ = 2 - 1 := by rw [h]\n    _ = 1 := by norm_num\n",
    " by\n  match x, h with\n  | 0, h => simp at h\n  | n + 1, h => omega\n",
    "\n  (fun (y : ℕ) (hy : y + 1 = 2) => by omega) x h\n",
    " by\n  rcases Nat.even_or_odd x with ⟨k, rfl⟩ | ⟨k, rfl⟩ <;> omega\n",
    " by\n  constructor <;> intro hx\n  · linarith\n  · nlinarith [hx]\n",
    " by\n  show x = 1\n  have : x + 1 = 1 + 1 := by simpa using h\n  exact Nat.add_right_cancel this\n",
    " by\n  exact aux x h\n  where\n    aux (y : ℕ) (hy : y + 1 = 2) : y = 1 := by omega\n",
    " by\n  have e : s!\"{x} {r#\"a \"b\"\"#}\" = s!\"{x} {r#\"a \"b\"\"#}\" := rfl\n  omega\n",
    " by\n  /- nested /- comment -/ with #eval -/\n  open Real in\n  omega\n",
]


SANDBOX_PROGRAMS = {  # HumanEval `add` answers that return the right sum after breaking a rule (issue 35)
    "children OOM-killed, the parent returns": """
import os, time
def add(a, b):
    for _ in range(4):  # 4 x 400 MiB, together over the 1 GiB cap
        if os.fork() == 0:
            hog = b'x' * (400 << 20)
            time.sleep(2)
            os._exit(0)
    for _ in range(4):
        os.wait()
    return a + b
""",
    "1.4 GiB in memfds": """
import os
def add(a, b):
    fds = []
    for _ in range(120):
        fd = os.memfd_create("hog")
        for _ in range(12):
            os.write(fd, b"x" * (1 << 20))
        fds.append(fd)
    return a + b
""",
    "reads the checkout, /opt, /srv or /var/log": """
import os
def add(a, b):
    seen = []
    for path in (CHECKOUT_README, "/opt", "/srv", "/var/log"):
        try:
            seen.append(open(path).read(1) if os.path.isfile(path) else os.listdir(path))
        except OSError:
            pass
    return a + b if any(seen) else None
""".replace("CHECKOUT_README", repr(str(Path(__file__).resolve().parents[1] / "README.md"))),
}


def sandbox() -> dict:
    """Issue 35's sandbox holes: each program is graded; a pass means the hole is open."""
    from rewardkit.code.execution import GradeConfig, Problem, grade

    add = Problem("add", "humaneval", prompt="def add(a, b):\n",
                  test="def check(candidate):\n    assert candidate(2, 3) == 5\n", entry_point="add")
    out = {}
    for name, program in SANDBOX_PROGRAMS.items():
        r = grade(add, program, GradeConfig(timeout=10))
        out[name] = {"passed": r.passed, "results": [int(c) for c in r.results], "reason": (r.reason or "")[:120]}
    return out


def lean_gate() -> dict:
    """Issue 35's attacks on the Lean gate and real proof shapes: which reach Lean, which are refused."""
    import re

    from rewardkit.jury.lean.check import DEFAULT_HEADER, build_source

    formal = DEFAULT_HEADER + "\n" + LEAN_STATEMENT + " by\n  sorry\n"
    through, placed = [], 0
    for name, after in LEAN_ATTACKS.items():
        source, reasons = build_source(formal, DEFAULT_HEADER + "\n" + LEAN_STATEMENT + after)
        if source is not None:
            through.append(name)
        placed += bool(re.search(r"line \d+, column \d+", " ".join(reasons)))
    refused = [k for k, after in enumerate(LEAN_PROOFS)
               if build_source(formal, DEFAULT_HEADER + "\n" + LEAN_STATEMENT + after)[0] is None]
    return {"attacks": len(LEAN_ATTACKS), "attacks_reaching_lean": len(through), "reaching_lean": through,
            "refusals_naming_line_and_column": placed, "real_proofs": len(LEAN_PROOFS),
            "real_proofs_refused": len(refused), "refused_proofs": refused}


PARTS = {"secrets": secrets, "refused_jobs": refused_jobs, "components": components, "bursts": bursts,
         "lean_gate": lean_gate, "split_bursts": split_bursts, "sandbox": sandbox, "spec_forms": spec_forms,
         "outputs": outputs}


def probe(parts: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="rewardkit-probe-") as t:
        work = Path(t)
        t0 = time.perf_counter()
        res = {k: (PARTS[k](work) if k in ("secrets", "refused_jobs", "components", "spec_forms", "outputs")
                   else PARTS[k]()) for k in parts}
        res["seconds"] = round(time.perf_counter() - t0, 1)
    return res


def markdown_issue35(r: dict) -> str:
    """The rows of issue 35's cases: spec forms through every command, and the output's owner."""
    rows = []
    if "spec_forms" in r:
        f = r["spec_forms"]
        where = "; ".join(f"{k}: {', '.join(v)}" for k, v in f["forms"].items() if v) or "none"
        rows.append(f"| spec forms whose login or password shows in any command's output or files "
                    f"({', '.join(f['commands'])}) | {f['forms_leaking']} of {f['forms_tried']} | {where} |")
    if "outputs" in r:
        o = r["outputs"]
        g = o["generate_on_a_users_file"]
        rows.append(f"| `eval generate --out mine.jsonl` over a user's file (last record without newline) | exit "
                    f"{g['exit']}, byte-identical {g['byte_identical']}, folder unchanged {g['folder_unchanged']} | |")
        for cmd in ("score", "eval generate"):
            x = o[f"{cmd}_out_names_a_folder"]
            rows.append(f"| `{cmd} --out nd1/x/` | exit {x['exit']}, file x written {x['file_x_written']}, "
                        f"folder unchanged {x['folder_unchanged']}, error lines {x['error_lines']} | |")
    if not rows:
        return ""
    return "\n## Issue 35\n\n| case | result | where |\n|---|---|---|\n" + "\n".join(rows) + "\n"


def lean_markdown(g: dict) -> str:
    """The Lean gate's rows (issue 35)."""
    return f"""
## Lean gate (issue 35)

| what | result |
|---|---|
| submissions hiding code after the theorem that reach Lean (`build_source` returns a text to run) | {g['attacks_reaching_lean']} of {g['attacks']} |
| refusals of them naming a line and column | {g['refusals_naming_line_and_column']} of {g['attacks'] - g['attacks_reaching_lean']} |
| real proof shapes refused (calc, match, bullets, `<;>`, term mode, indented `where`, raw strings in `s!`) | {g['real_proofs_refused']} of {g['real_proofs']} |

Reaching Lean: {', '.join(g['reaching_lean']) or 'none'}. Real proofs refused (indices): {g['refused_proofs'] or 'none'}.
"""


def server_sandbox_markdown(r: dict) -> str:
    """The rows of issue 35's serve-judge bursts written apart and its sandbox holes."""
    out = ""
    if "split_bursts" in r:
        b = r["split_bursts"]
        out += f"""
## serve-judge, bodies written apart from their headers (issue 35)

{b['bursts']} bursts of {b['clients_per_burst']} clients that send every header first, then every body (httpx's two
writes): answers {', '.join(f'{k}: {v}' for k, v in sorted(b['answers'].items()))}. A 408 here is a body that was
arriving, evicted by newer requests; 503 with Retry-After past the work slots is the designed answer.
"""
    if "sandbox" in r:
        rows = "".join(f"| {k} | {'passed' if v['passed'] else 'failed'} ({v['results']}) | {v['reason'] or '-'} |\n"
                       for k, v in r["sandbox"].items())
        out += f"""
## Sandbox: programs that return the right answer after breaking a rule (issue 35)

| program | graded | reason |
|---|---|---|
{rows}"""
    return out


def markdown(cmd: str, r: dict) -> str:
    head = "" if "secrets" in r else f"# Reliability probe\n\nCommand: `{cmd}` ({r['seconds']} s)\n"
    return ((head or _core_markdown(cmd, r)) + (lean_markdown(r["lean_gate"]) if "lean_gate" in r else "")
            + server_sandbox_markdown(r) + markdown_issue35(r))


def _core_markdown(cmd: str, r: dict) -> str:
    s, j, c, b = r["secrets"], r["refused_jobs"], r["components"], r["bursts"]
    leaks = "; ".join(f"{k}: {', '.join(v['shown_in'])}" for k, v in s["forms"].items() if v["shown_in"]) or "none"
    return f"""# Reliability probe: secrets, refused jobs, failed components, body bursts

Command: `{cmd}` ({r['seconds']} s; servers on 127.0.0.1, files in a temporary folder)

| what | result |
|---|---|
| URL forms with a login or password shown (manifest, rows, CLI line, logs, serve-judge bodies) | {s['forms_leaking']} of {s['forms_tried']} |
| ... of which the password (or token) itself | {s['forms_leaking_the_password']} of {s['forms_tried']} |
| URL forms whose Basic auth differs from what httpx sends | {s['forms_with_other_credentials']} of {s['forms_tried']} |
| serve-judge `/v1/models` ids holding the upstream's address | {s['model_ids_with_upstream_address']} of {s['forms_tried']} |
| refused `--out` targets that changed the folder | {len(j['changed_the_folder'])} of {len(j['targets'])} ({j['refused']} refused) |
| finished jobs leaving `OUT.lock` | {j['finished_jobs_leaving_the_lock']} of {j['finished_jobs']} |
| SIGKILLs of the CLI: stale locks left / next runs blocked by one | {j['stale_locks_after_kills']} / {j['runs_blocked_by_a_stale_lock']} of {j['kills']} |
| final run after the kills: exit, rows, duplicates, lock left | {j['final_run_exit']}, {j['final_rows']}, {j['final_duplicates']}, {j['lock_after_final_run']} |
| non-ok responses whose row keeps a component value | {c['non_ok_with_a_component_value']} of {c['non_ok_responses']} |
| serve-judge, {b['bursts']} bursts of {b['clients_per_burst']} one-write requests ({b['body_bytes']}-byte body) | {', '.join(f'{k}: {v}' for k, v in sorted(b['answers'].items()))} |

Where logins or passwords showed: {leaks}. Targets that changed the folder: {', '.join(j['changed_the_folder']) or 'none'}.
Answers per burst: {b['per_burst']}. 503 (with Retry-After) past the 256 work slots is serve-judge's designed
answer to a burst; 408 "body still arriving" for a body that was sent with its headers is the defect probed.
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ref", default=None, help="probe the code of this commit (default: this checkout)")
    ap.add_argument("--out", default="reliability_probe", help="results name under benchmarks/results/")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated parts to run (default all: {', '.join(PARTS)})")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    parts = [p for p in a.parts.split(",") if p]
    if unknown := [p for p in parts if p not in PARTS]:
        raise SystemExit(f"unknown parts {unknown}; choose from {', '.join(PARTS)}")
    if a.inner:  # run inside the checkout under test (cwd): its packages win, as in its tests
        sys.path.insert(0, os.getcwd())
        import conftest  # noqa: F401

        print("PROBE " + json.dumps(probe(parts)))
        return
    sys.path.insert(0, str(HERE))
    from _common import checkout, machine, write_results
    from rewardkit.evals.data import shared_dir

    cmd = ("python benchmarks/reliability_probe.py" + (f" --ref {a.ref}" if a.ref else "")
           + (f" --parts {a.parts}" if parts != list(PARTS) else "") + (f" --out {a.out}" if a.out != "reliability_probe" else ""))
    with checkout(a.ref) as root:
        env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1", REWARDKIT_SHARED=str(shared_dir()))
        p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--inner", "--parts", ",".join(parts)], cwd=root, env=env,
                           capture_output=True, text=True, timeout=1800)
    line = next((x for x in p.stdout.splitlines() if x.startswith("PROBE ")), None)
    if line is None:
        raise SystemExit(f"probe failed ({p.returncode}):\n{p.stderr[-3000:]}")
    res = json.loads(line[6:])
    data = {"command": cmd, "ref": a.ref, "machine": machine(), **res}
    md = markdown(cmd, res)
    write_results(a.out, data, md)
    print(md)


if __name__ == "__main__":
    main()
