"""Errors every command reports the same way: one ``error:`` line and exit code 2, found before any work (a judge
that cannot answer before the first group or before listening), never a traceback or a row of error statuses."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from rewardkit.cli.app import app
from typer.testing import CliRunner

from rewardkit import __version__
from rewardkit.http_server import BackgroundServer, Route, make_app

ROOT = Path(__file__).resolve().parents[2]
# this checkout's CLI (the root conftest maps cli/ to rewardkit.cli), not whichever rewardkit is installed
CLI = [sys.executable, "-c", "import conftest; from rewardkit.cli.app import main; main()"]


def run_cli(*args: object, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def assert_one_line(res: subprocess.CompletedProcess, *needles: str) -> None:
    """Exit 2, stderr exactly one ``error:`` line containing every needle, no traceback (beside it only the
    start-up line saying what the judge loaded as: ``judge: ...``)."""
    lines = [x for x in res.stderr.strip().splitlines() if not x.startswith("judge: ")]
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr[-2000:]
    for n in needles:
        assert n in lines[0], (n, lines[0])


@pytest.fixture
def rollouts(tmp_path: Path) -> Path:
    p = tmp_path / "rollouts.jsonl"
    p.write_text(json.dumps({"id": "g", "problem": "1+1?", "answer": "2", "responses": ["2", "2"], "correct": [True, True]}) + "\n")
    return p


@pytest.fixture(scope="module")
def judge_server():
    """A real HTTP server on 127.0.0.1 that lists one model, 'judge-a', at /v1/models (and serves nothing else)."""
    async def models(req):
        return {"object": "list", "data": [{"id": "judge-a", "object": "model"}]}

    with BackgroundServer(make_app([Route("GET", "/v1/models", models)])) as srv:
        yield srv.url + "/v1"


@pytest.fixture
def dead_url():
    """The URL of a port that is ours and refuses connections: bound but not listening, held for the whole test
    (a port picked and closed could be taken by another process meanwhile)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{s.getsockname()[1]}/v1"


# ------------------------------------------------------------------------------ a bad judge, before any work

def test_score_with_a_judge_that_does_not_exist_fails_before_the_first_group(rollouts, tmp_path, monkeypatch):
    def no_network(self, address):  # nothing may try the hub for a local name that does not exist
        if not (isinstance(address, tuple) and address[0] in ("127.0.0.1", "::1", "localhost")):
            raise AssertionError(f"network connection attempted: {address}")
        return real_connect(self, address)

    real_connect = socket.socket.connect
    monkeypatch.setattr(socket.socket, "connect", no_network)
    out = tmp_path / "o.jsonl"
    res = CliRunner().invoke(app, ["score", str(rollouts), "--scorer", "arena", "--judge", "nosuchmodel",
                                   "--out", str(out)])
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: judge 'nosuchmodel': no such model folder"), res.output
    assert not out.exists()  # no rows of status error


def test_score_with_a_url_judge_that_does_not_serve_the_model_fails_at_start(rollouts, tmp_path, judge_server):
    out = tmp_path / "o.jsonl"
    res = CliRunner().invoke(app, ["score", str(rollouts), "--scorer", "pointwise", "--judge",
                                   f"{judge_server}?model=judge-b", "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert "does not list 'judge-b'" in res.output and "'judge-a'" in res.output
    assert not out.exists()


def test_score_reads_o_judge_as_the_judge_and_never_replaces_it(rollouts, tmp_path, dead_url, no_default_judge):
    """Before: `-o judge=URL --judge OTHER` scored with OTHER, and `-o judge=URL --device cpu` with the default
    smollm2 (the local-judge options filled in the default judge, which then replaced the one given)."""
    out = tmp_path / "o.jsonl"
    for extra, message in (
        (["--judge", "nosuchmodel"], f"error: invalid value for --judge: -o judge={dead_url} and --judge nosuchmodel "
                                     "name two judges; give one"),
        (["--device", "cpu"], f"error: invalid value for --judge: --device apply to a local transformers judge, not "
                              f"'{dead_url}' (http); set that backend's options in its spec"),
    ):
        res = CliRunner().invoke(app, ["score", str(rollouts), "--scorer", "pointwise", "-o", f"judge={dead_url}",
                                       *extra, "--out", str(out)])
        assert res.exit_code == 2 and res.stderr.startswith(message + " (see ") and res.stderr.count("\n") == 1, res.output
    res = CliRunner().invoke(app, ["score", str(rollouts), "--scorer", "pointwise", "-o", f"judge={dead_url}",
                                   "--judge", dead_url, "--out", str(out)])  # the same judge twice is that judge
    assert res.exit_code == 2 and res.stderr.startswith(f"error: judge {dead_url}: GET {dead_url}/models failed")
    assert not out.exists()


@pytest.mark.parametrize("command", ["verifier", "select"])
def test_eval_reads_o_judge_as_the_judge(rollouts, tmp_path, dead_url, command):
    """Before: `-o judge=URL --judge OTHER` scored with OTHER; `-o judge=URL` alone was not checked before the
    first group (its groups came out with status error)."""
    out = tmp_path / "ev"
    res = CliRunner().invoke(app, ["eval", command, str(rollouts), "-s", "pointwise", "-o", f"judge={dead_url}",
                                   "--judge", "nosuchmodel", "--out", str(out)])
    assert res.exit_code == 2 and res.stderr.startswith(
        f"error: invalid value for --judge: -o judge={dead_url} and --judge nosuchmodel name two judges"), res.output
    res = CliRunner().invoke(app, ["eval", command, str(rollouts), "-s", "pointwise", "-o", f"judge={dead_url}",
                                   "--out", str(out)])
    assert res.exit_code == 2 and res.stderr.startswith(f"error: judge {dead_url}: GET {dead_url}/models failed")
    assert not (out / "pointwise.scores.jsonl").exists()


def test_eval_with_a_judge_that_does_not_exist_fails_before_the_first_group(rollouts, tmp_path):
    res = CliRunner().invoke(app, ["eval", "verifier", str(rollouts), "--scorer", "pointwise", "--judge", "nosuchmodel",
                                   "--out", str(tmp_path / "ev")])
    assert res.exit_code == 2, res.output
    assert res.output.startswith("error: judge 'nosuchmodel': no such model folder") and res.output.count("\n") == 1
    assert not (tmp_path / "ev" / "verifier.json").exists()


def test_check_judge_asks_the_server_for_its_models(judge_server, dead_url):
    from rewardkit.backends import check_judge

    backend = check_judge(judge_server)  # no model named: the first one listed, as discovery would
    assert backend.model == "judge-a"
    assert check_judge(f"{judge_server}?model=judge-a", load=False).model == "judge-a"
    with pytest.raises(ValueError, match="does not list 'judge-b'"):
        check_judge(f"{judge_server}?model=judge-b")
    with pytest.raises(ValueError, match=r"/models failed \(ConnectError"):
        check_judge(f"{dead_url}?retries=5&timeout=5")  # one try, no retries: found at once


def test_check_judge_without_loading_locates_a_local_model(tmp_path):
    from rewardkit.backends import check_judge

    with pytest.raises(ValueError, match="no such model folder"):
        check_judge("nosuchmodel", load=False)
    (tmp_path / "m").mkdir()
    with pytest.raises(ValueError, match="has no config.json"):
        check_judge(str(tmp_path / "m"), load=False)


@pytest.mark.parametrize("command", [["serve", "--scorer", "arena", "--group-size", "8", "--judge", "nosuchmodel"],
                                     ["serve-judge", "nosuchmodel"]])
def test_servers_refuse_a_judge_that_does_not_exist_before_listening(command):
    res = run_cli(*command, "--port", "0", timeout=60)  # before: listened, then 46 s of hub retries -> 500
    assert_one_line(res, "judge 'nosuchmodel': no such model folder")


def test_serve_reads_o_judge_as_the_judge(dead_url):
    """Before: `serve -o judge=URL --judge OTHER` served OTHER's rewards without a word."""
    res = CliRunner().invoke(app, ["serve", "--scorer", "pointwise", "--group-size", "2", "-o", f"judge={dead_url}",
                                   "--judge", "nosuchmodel", "--port", "0"])
    assert res.exit_code == 2 and res.stderr.startswith(
        f"error: invalid value for --judge: -o judge={dead_url} and --judge nosuchmodel name two judges"), res.output


def test_serve_refuses_a_url_judge_that_does_not_answer(dead_url):
    res = run_cli("serve", "--scorer", "pointwise", "--judge", dead_url, "--port", "0", timeout=60)
    assert_one_line(res, f"judge {dead_url}: GET {dead_url}/models failed")


# ------------------------------------------------------------------------------ every command, one line

@pytest.mark.parametrize("command", [["serve", "--port", "0"], ["score", "{rollouts}"],
                                     ["eval", "verifier", "{rollouts}", "--out", "{out}"]])
def test_a_scorer_name_with_a_typo_is_one_line_for_every_command(command, rollouts, tmp_path):
    args = [a.format(rollouts=rollouts, out=tmp_path / "ev") for a in command]
    res = run_cli(*args, "--scorer", "verifer")
    assert_one_line(res, "unknown scorer 'verifer'", "verifier")


def test_a_port_in_use_is_one_line(judge_server):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        res = run_cli("serve", "--scorer", "verifier", "--port", port, "--max-pending", 1024)  # within any file limit
        assert_one_line(res, f"127.0.0.1:{port}: cannot listen: Address already in use", "--port")
        res = run_cli("serve-judge", judge_server, "--port", port)  # the judge answers; the port does not
        assert_one_line(res, f"127.0.0.1:{port}: cannot listen")


def test_version():
    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.strip() == f"rewardkit {__version__}"


# ------------------------------------------------------------ eval commands check their judge (or model) first

@pytest.mark.parametrize("command", [
    ["eval", "headline", "-s", "pointwise", "--judge", "{judge}", "--work", "{out}"],
    ["eval", "judge", "--judge", "{judge}", "--pairs", "1", "--pb-pairs", "1", "--injection-pairs", "1", "--out", "{out}"],
    ["eval", "generate", "{judge}", "gsm8k", "--limit", "1", "--n", "1", "--out", "{out}/r.jsonl"],
])
@pytest.mark.parametrize("judge", ["/nonexistent/model", "dead"])
def test_eval_commands_check_the_judge_before_any_work(command, judge, dead_url, tmp_path):
    spec = dead_url if judge == "dead" else judge
    res = run_cli(*[a.format(judge=spec, out=tmp_path / "o") for a in command], timeout=120)
    # before: headline exit 0 with rows of `0.0 | - | 0%`, judge exit 0 with `invalid` rows, generate exit 1
    assert_one_line(res, spec)
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


# ------------------------------------------------------------------ parser errors and ports: one line, by name

@pytest.mark.parametrize("args, needles", [
    (["score"], ["missing argument 'input'", "rewardkit score --help"]),
    (["score", "x.jsonl", "--bogus"], ["no such option: --bogus"]),
    (["eval", "headline", "--bogus"], ["no such option: --bogus", "rewardkit eval headline --help"]),
    (["train", "p.jsonl", "--set", "lr"], ["--set", "expected KEY=VALUE, got 'lr'"]),
])
def test_parser_errors_are_one_line(args, needles):
    assert_one_line(run_cli(*args, timeout=60), *needles)  # before: a 5-line Rich box


@pytest.mark.parametrize("command", [["serve", "--scorer", "verifier"], ["serve-judge", "smollm2"]])
@pytest.mark.parametrize("port", ["99999", "65536", "-1"])
def test_a_port_outside_0_65535_is_refused_by_name(command, port):
    # before: 99999 served on 34463 (wrapped), 65536 on a random port, -1 "Servname not supported"
    res = run_cli(*command, "--port", port, timeout=60)
    assert_one_line(res, "'--port'", "0" if port == "-1" else "65535")


def test_short_version_flag():
    res = CliRunner().invoke(app, ["-V"])
    assert res.exit_code == 0 and res.output.strip() == f"rewardkit {__version__}"
