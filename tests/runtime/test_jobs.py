"""Kill-and-resume with real processes: no row lost or duplicated whatever the moment of the kill."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rewardkit.runtime.jobs import repair_jsonl, score_file
from rewardkit.scoring import get_scorer
from rewardkit.types import Group, Status


def ids(path):
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


ROOT = Path(__file__).resolve().parents[2]
# this checkout's CLI (the root conftest maps cli/ to rewardkit.cli), not whichever rewardkit is installed
CLI = [sys.executable, "-c", "import conftest; from rewardkit.cli.app import main; main()"]


def run_cli(*args, **kw):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=300, cwd=ROOT, **kw)


@pytest.fixture(scope="module")
def reference_output(tmp_path_factory, rollouts_path):
    out = tmp_path_factory.mktemp("ref") / "ref.jsonl"
    # a minute per check: on a loaded machine the 5 s deadline could time out a check in one run only
    score_file(rollouts_path, get_scorer("verifier", timeout=60.0), out, batch_size=4)
    return out


@pytest.mark.parametrize("kill_after_rows", [37])
def test_kill_and_resume_matches_uninterrupted_run(tmp_path, rollouts_path, reference_output, kill_after_rows):
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen([*CLI, "score", str(rollouts_path), "--scorer", "verifier", "-o", "timeout=60",
                             "--out", str(out), "--batch-size", "1"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if out.exists() and out.read_bytes().count(b"\n") >= kill_after_rows:
            break
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    n_before = len(ids(out)) if out.exists() else 0
    assert n_before >= kill_after_rows
    assert lock_path(out).exists()  # a killed job cannot remove its lock: the next run takes it over
    # simulate a kill in the middle of a write: a half line at the end must not survive
    with open(out, "ab") as f:
        f.write(b'{"id": "math_cot_100-0')
    r = run_cli("score", rollouts_path, "--scorer", "verifier", "-o", "timeout=60", "--out", out)
    assert r.returncode == 0, r.stderr
    assert "resuming" in r.stderr
    assert not lock_path(out).exists()  # and removes it when it ends (before: it stayed)
    got, want = ids(out), ids(reference_output)
    assert got == want  # same rows, same order, no duplicates, nothing lost
    ref_rows = {json.loads(x)["id"]: json.loads(x) for x in reference_output.read_text().splitlines()}
    for line in out.read_text().splitlines():
        row = json.loads(line)
        assert row["rewards"] == ref_rows[row["id"]]["rewards"]


def test_repair_cuts_partial_line(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_bytes(b'{"id": "a"}\n{"id": "b"}\n{"id": "c", "rew')
    assert [r["id"] for r in repair_jsonl(p)] == ["a", "b"]
    assert p.read_bytes() == b'{"id": "a"}\n{"id": "b"}\n'


def test_cli_bad_input_names_the_place_and_skip_bad(tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"id": "a", "problem": "1+1", "answer": "2", "responses": ["\\\\boxed{2}"]}\n'
                   '{"id": "b", "problem": "p", "responses": []}\n'
                   '{"id": "c", "problem": "2+2", "answer": "4", "responses": ["\\\\boxed{5}"]}\n')
    out = tmp_path / "o.jsonl"
    r = run_cli("score", inp, "--out", out)
    assert r.returncode == 2
    assert "in.jsonl:2: field 'responses': empty response list" in " ".join(r.stderr.split())
    r = run_cli("score", inp, "--out", out, "--skip-bad")
    assert r.returncode == 0, r.stderr
    assert ids(out) == ["a", "c"]
    assert [json.loads(x)["rewards"] for x in out.read_text().splitlines()] == [[1.0], [0.0]]
    rej = [json.loads(x) for x in (tmp_path / "o.jsonl.rejects.jsonl").read_text().splitlines()]
    assert len(rej) == 1 and rej[0]["line"] == 2 and rej[0]["field"] == "responses"


def test_cli_lists_scorers():
    r = run_cli("scorers", "--json")
    assert r.returncode == 0, r.stderr
    rows = {x["name"]: x for x in json.loads(r.stdout)}
    assert "verifier" in rows and rows["verifier"]["description"]
    assert {o["name"] for o in rows["verifier"]["options"]} >= {"timeout", "workers"}


# ------------------------------------------------------------------ jobs never mix, lose or destroy data

import hashlib  # noqa: E402
import resource  # noqa: E402

import numpy as np  # noqa: E402
from rewardkit.cli.app import app  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from rewardkit.runtime.jobs import JobError, OutputLock, lock_path, manifest_path, summarize  # noqa: E402
from rewardkit.types import GroupScore  # noqa: E402


class Scripted:
    """A scorer whose reward is 1 for responses containing 'good'; ``fail`` ids time out, ``boom`` ids raise."""

    name = "scripted"

    def __init__(self, fail=(), boom=(), extra=None):
        self.fail, self.boom, self.extra, self.seen = set(fail), set(boom), extra, []

    def score(self, groups):
        self.seen.extend(g.id for g in groups)
        if any(g.id in self.boom for g in groups):
            return [1 / 0]  # a programming error inside the scorer
        out = []
        for g in groups:
            if g.id in self.fail:
                out.append(GroupScore.failed(g.id, len(g), Status.TIMEOUT, "judge timed out"))
            else:
                out.append(GroupScore(g.id, [float("good" in r) for r in g.responses], [Status.OK] * len(g),
                                      extra=dict(self.extra or {})))
        return out


def write_groups(path, ids, **extra):
    rows = [{"id": i, "prompt": f"p {i}", "responses": ["good", "bad"], **extra} for i in ids]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def rows(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def digest(*paths):
    return [hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None for p in paths]


@pytest.mark.parametrize("content", [
    b"my notes\nan unterminated last line",  # the half-line repair must not touch a foreign file
    b'{"id": "a", "rewards": [1.0], "statuses": ["ok"]}\n{"id": "b", "rew',  # a manifest-less (old) output
])
def test_foreign_out_is_refused_and_left_byte_for_byte(tmp_path, content):
    inp = write_groups(tmp_path / "in.jsonl", "abc")
    out = tmp_path / "out.jsonl"
    out.write_bytes(content)
    for restart in (False, True):
        with pytest.raises(JobError, match="not a rewardkit output"):
            score_file(inp, Scripted(), out, restart=restart)
        assert out.read_bytes() == content and not manifest_path(out).exists()


def test_out_equal_to_input_is_refused_before_any_file_is_created(tmp_path):
    inp = write_groups(tmp_path / "in.jsonl", "abc")
    before = sorted(tmp_path.iterdir())
    for out in (inp, tmp_path / "." / "in.jsonl"):
        with pytest.raises(JobError, match="input"):
            score_file(inp, Scripted(), out)
    assert digest(inp) == digest(inp) and sorted(tmp_path.iterdir()) == before


def test_manifest_records_the_job_and_a_mismatch_is_refused(tmp_path):
    inp = write_groups(tmp_path / "in.jsonl", "abcd")
    out = tmp_path / "out.jsonl"
    score_file(inp, Scripted(), out, options={"temperature": "0.5"})
    m = json.loads(manifest_path(out).read_text())
    assert m["scorer"] == "scripted" and m["options"] == {"temperature": "0.5"}
    assert m["input"]["sha256"] == hashlib.sha256(inp.read_bytes()).hexdigest()
    assert m["input"]["path"] == str(inp.resolve()) and m["rewardkit_version"]
    assert [r["scorer"] for r in rows(out)] == ["scripted"] * 4

    with open(out, "ab") as f:  # a half line from a kill: a refused job must not repair it either
        f.write(b'{"id": "e", "rew')
    before = digest(out, manifest_path(out))

    class Other(Scripted):
        name = "other"

    for kw, what in [({"scorer": Other()}, "scorer"), ({"options": {"temperature": "0.7"}}, "options")]:
        sc = kw.pop("scorer", Scripted())
        with pytest.raises(JobError, match=f"another job: {what}"):
            score_file(inp, sc, out, **kw)
        assert digest(out, manifest_path(out)) == before
    write_groups(inp, "abcde")  # the input changed under the same name
    with pytest.raises(JobError, match="input .* other contents"):
        score_file(inp, Scripted(), out, options={"temperature": "0.5"})
    assert digest(out, manifest_path(out)) == before

    score_file(inp, Other(), out, restart=True)
    assert [(r["id"], r["scorer"]) for r in rows(out)] == [(i, "other") for i in "abcde"]
    assert json.loads(manifest_path(out).read_text())["scorer"] == "other"


def test_retry_failed_rescores_only_failed_groups_and_keeps_one_row_per_group(tmp_path):
    inp = write_groups(tmp_path / "in.jsonl", "abcde")
    out = tmp_path / "out.jsonl"
    score_file(inp, Scripted(fail="bd"), out, batch_size=2)
    first = {r["id"]: json.dumps(r) for r in rows(out)}
    assert [r["statuses"] for r in rows(out)][1] == ["timeout", "timeout"]

    again = Scripted()
    s = score_file(inp, again, out)  # a plain resume does not retry
    assert again.seen == [] and s.skipped_done == 5

    retry = Scripted()
    s = score_file(inp, retry, out, retry_failed=True)
    assert retry.seen == ["b", "d"] and s.retried == 2 and s.scored_now == 2
    got = rows(out)
    assert [r["id"] for r in got] == list("abcde")
    assert all(r["statuses"] == ["ok", "ok"] for r in got)
    assert {i: json.dumps(r) for i, r in zip("ace", [got[0], got[2], got[4]])} == {i: first[i] for i in "ace"}


def test_a_retry_killed_half_way_leaves_duplicates_that_the_next_run_resolves(tmp_path):
    inp = write_groups(tmp_path / "in.jsonl", "abc")
    out = tmp_path / "out.jsonl"
    score_file(inp, Scripted(fail="b"), out)
    fixed = dict(rows(out)[1], statuses=["ok", "ok"], rewards=[1.0, 0.0])
    with open(out, "a") as f:  # what a killed --retry-failed leaves: b's new row appended
        f.write(json.dumps(fixed) + "\n")
    score_file(inp, Scripted(), out)
    got = rows(out)
    assert [r["id"] for r in got] == ["a", "b", "c"] and got[1]["statuses"] == ["ok", "ok"]


def test_second_concurrent_job_on_one_out_fails_fast(tmp_path):
    inp = write_groups(tmp_path / "in.jsonl", "abcd")
    out = tmp_path / "out.jsonl"
    seen = {}

    class Probe(Scripted):
        def score(self, groups):
            if not seen:  # while this job holds the lock, a real second `rewardkit score` starts
                seen["r"] = run_cli("score", inp, "--scorer", "verifier", "--out", out)
            return super().score(groups)

    score_file(inp, Probe(), out, batch_size=2)
    r = seen["r"]
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert f"another rewardkit job (pid {os.getpid()}) is writing it" in r.stderr
    assert [x["id"] for x in rows(out)] == list("abcd") and {x["scorer"] for x in rows(out)} == {"scripted"}


def test_the_lock_is_removed_when_the_job_ends_and_still_keeps_a_second_job_out(tmp_path):
    """Before: OUT.lock stayed beside every finished output."""
    inp = write_groups(tmp_path / "in.jsonl", "ab")
    out = tmp_path / "out.jsonl"
    score_file(inp, Scripted(), out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl", "out.jsonl.manifest.json"]
    with OutputLock(out):  # a job holding the lock (this process) still keeps a second one out
        with pytest.raises(JobError, match="another rewardkit job"):
            score_file(inp, Scripted(), out, restart=True)
        assert lock_path(out).exists()
    assert not lock_path(out).exists()


def test_a_lock_removed_between_open_and_flock_is_not_taken(tmp_path):
    """The removal is safe: a job that opened the lock file just before its holder removed it, and takes the
    flock after, must not run beside the job that created the next lock file."""
    out = tmp_path / "out.jsonl"
    first, late, third = OutputLock(out), OutputLock(out), OutputLock(out)
    first.__enter__()
    real_open = late._open
    calls = []

    def open_then_race():
        fd = real_open()
        if not calls:  # between this open and the flock: the holder ends, a third job starts
            first.__exit__(None, None, None)
            third.__enter__()
        calls.append(fd)
        return fd

    late._open = open_then_race
    try:
        with pytest.raises(JobError, match="another rewardkit job"):
            late.__enter__()
        assert len(calls) == 2  # the orphaned file was flocked, noticed and left for the live one
    finally:
        third.__exit__(None, None, None)
    assert not lock_path(out).exists()


def test_one_raising_group_gets_error_with_the_exception_and_the_rest_goes_on(tmp_path):
    inp = write_groups(tmp_path / "in.jsonl", "abcde")
    out = tmp_path / "out.jsonl"
    s = score_file(inp, Scripted(boom="c", extra={"x": object()} ), out, batch_size=5)
    got = {r["id"]: r for r in rows(out)}
    assert got["c"]["statuses"] == ["error", "error"]
    assert got["c"]["messages"][0].startswith("ZeroDivisionError: division by zero (at test_jobs.py:")
    # a scorer field that is not JSON is a per-group error too (every other group has it: all error)
    assert "TypeError" in got["a"]["messages"][0]
    assert s.exceptions == 5 and "ZeroDivisionError" in s.first_exception or "TypeError" in s.first_exception


def test_an_infinite_logged_value_keeps_the_group_s_rewards(tmp_path):
    inp = write_groups(tmp_path / "in.jsonl", "ab")
    out = tmp_path / "out.jsonl"
    s = score_file(inp, Scripted(extra={"logp": [float("-inf"), -1.0]}), out, batch_size=2)
    got = {r["id"]: r for r in rows(out)}
    assert s.exceptions == 0 and [got[i]["statuses"] for i in "ab"] == [["ok", "ok"]] * 2  # was: all error
    assert got["a"]["logp"] == [None, -1.0]


def test_one_raising_group_does_not_touch_the_others(tmp_path):
    inp = write_groups(tmp_path / "in.jsonl", "abcde")
    out = tmp_path / "out.jsonl"
    s = score_file(inp, Scripted(boom="c"), out, batch_size=5)
    got = {r["id"]: r for r in rows(out)}
    assert [got[i]["statuses"] for i in "abde"] == [["ok", "ok"]] * 4 and got["c"]["statuses"] == ["error"] * 2
    assert s.exceptions == 1 and s.first_exception.startswith("group 'c': ZeroDivisionError")


@pytest.mark.parametrize("skip_bad", [False, True])
def test_lone_surrogates_get_a_status_and_the_job_goes_on(tmp_path, skip_bad):
    inp = tmp_path / "in.jsonl"
    inp.write_text(
        '{"id": "ok1", "problem": "1+1", "answer": "2", "responses": ["\\\\boxed{2}", "\\\\boxed{3}"]}\n'
        '{"id": "bad\\ud800id", "problem": "1+1", "answer": "2", "responses": ["\\\\boxed{2}"]}\n'
        '{"id": "resp", "problem": "1+1", "answer": "2", "responses": ["\\\\boxed{2}", "x\\udc80 \\\\boxed{2}"]}\n'
        '{"id": "ok2", "problem": "2+2", "answer": "4", "responses": ["\\\\boxed{4}"]}\n')
    out = tmp_path / "out.jsonl"
    args = ["score", str(inp), "--out", str(out)] + (["--skip-bad"] if skip_bad else [])
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    got = {x["id"]: x for x in rows(out)}
    assert list(got) == ["ok1", "bad\ud800id", "resp", "ok2"]
    assert got["ok1"]["rewards"] == [1.0, 0.0] and got["ok2"]["rewards"] == [1.0]
    assert got["bad\ud800id"]["statuses"] == ["error"] and "lone surrogate" in got["bad\ud800id"]["messages"][0]
    assert got["resp"]["statuses"] == ["ok", "error"] and got["resp"]["rewards"] == [1.0, None]
    assert got["resp"]["components"]["verifier"] == [1.0, None]  # before: 0.0, a "wrong answer" for a failure
    assert "lone surrogate at character 1" in got["resp"]["messages"][1]
    r = CliRunner().invoke(app, args)  # the escaped id reads back as the same id: nothing rescored
    assert r.exit_code == 0 and "resuming: 4 of 4" in r.output


def test_rows_carry_scorer_and_input_labels(reference_output, rollouts_path):
    labels = [json.loads(x)["correct"] for x in rollouts_path.open()]
    got = rows(reference_output)
    assert [r["correct"] for r in got] == labels and {r["scorer"] for r in got} == {"verifier"}
    # metrics from the output alone: verifier accuracy against the labels
    agree = np.mean([a == (b == 1.0) for r in got for a, b in zip(r["correct"], r["rewards"])])
    assert agree > 0.99


def test_summary_reports_routing_as_the_scorer_decided():
    # an arena row: routed as non-diverse (verifier rewards all equal), tournament rewards diverse afterwards
    routed = {"id": "g", "rewards": [0.9, 0.1], "statuses": ["ok", "ok"], "components": {"routed": True}}
    kept = {"id": "h", "rewards": [1.0, 0.0], "statuses": ["ok", "ok"], "components": {"routed": False}}
    s = summarize([routed, kept])
    assert (s.non_diverse_fraction, s.non_diverse_source) == (0.5, "routed")
    stats = [dict(r, stats=r.pop("components")) for r in (dict(routed), dict(kept))]  # GroupScore.stats
    assert summarize(stats).non_diverse_fraction == 0.5
    plain = [{"id": "g", "rewards": [1.0, 1.0], "statuses": ["ok", "ok"]}, dict(kept, components={})]
    s = summarize(plain)
    assert (s.non_diverse_fraction, s.non_diverse_source) == (0.5, "rewards")


def test_executor_seam_gets_batches_in_order(tmp_path):
    inp = write_groups(tmp_path / "in.jsonl", "abcdefg")
    out = tmp_path / "out.jsonl"
    sc, sizes = Scripted(), []

    def executor(batches):  # e.g. a pool would submit every batch, then yield results in order
        pending = list(batches)
        sizes.extend(len(b) for b in pending)
        for b in pending:
            yield b, sc.score(b)

    score_file(inp, sc, out, batch_size=3, executor=executor)
    assert sizes == [3, 3, 1] and [r["id"] for r in rows(out)] == list("abcdefg")

    def shuffled(batches):
        pending = list(batches)
        for b in reversed(pending):
            yield b, sc.score(b)

    with pytest.raises(RuntimeError, match="out of input order"):
        score_file(inp, sc, tmp_path / "o2.jsonl", batch_size=3, executor=shuffled)


def test_disk_full_is_one_line_and_the_rerun_completes(tmp_path, rollouts_path, reference_output):
    out = tmp_path / "out.jsonl"

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    r = subprocess.run([*CLI, "score", str(rollouts_path), "--out", str(out), "--batch-size", "4"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300, preexec_fn=small_files)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "File too large; rows written so far are kept" in r.stderr
    assert 0 < len(out.read_bytes()) <= 20_000
    r = run_cli("score", rollouts_path, "--out", out)
    assert r.returncode == 0, r.stderr
    assert ids(out) == ids(reference_output)


def test_soak_random_kills_then_resume_equals_uninterrupted_run(tmp_path, rollouts_path):
    """The CI-sized soak (benchmarks/score_soak.py runs 20 kills on 3,000 groups)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from score_soak import soak

    # kills triggered in the first 60% of the output, so each lands while work remains, however fast the machine
    res = soak(rollouts_path, tmp_path, groups=300, kills=5, batch_size=4, seed=1, span=0.6)
    assert res["identical"] and res["duplicates"] == 0 and res["missing"] == 0, res
    assert res["partial_output_at_kill"] >= 1, res  # a kill did interrupt real work (the test is not vacuous)


def test_temp_files_of_a_killed_rewrite_are_removed_and_the_file_is_intact(tmp_path):
    inp = write_groups(tmp_path / "in.jsonl", "abc")
    out = tmp_path / "out.jsonl"
    score_file(inp, Scripted(fail="b"), out)
    before = out.read_bytes()
    stale = tmp_path / ".out.jsonl.99999.tmp"  # a --retry-failed rewrite SIGKILLed before os.replace
    stale.write_bytes(before[:30])
    score_file(inp, Scripted(), out)
    assert not stale.exists() and out.read_bytes() == before


def test_arena_job_summary_reports_routing_not_rewards_after_the_tournament(tmp_path):
    from rewardkit.arena.scorers import ArenaScorer
    from rewardkit.backends.base import Completion, JudgeBackend

    class AlwaysA(JudgeBackend):
        """A maximally position-biased judge: every pair goes to response A."""

        model_id = "always-a"

        def generate(self, requests):
            return [Completion(["\\boxed{A}"], prompt_tokens=1, completion_tokens=1) for _ in requests]

        def verdict_probs(self, requests):  # pragma: no cover - generate mode only
            raise NotImplementedError

    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"id": "same", "problem": "1+1", "answer": "2", "responses": ["\\boxed{2}"] * 4}) + "\n"
                   + json.dumps({"id": "mixed", "problem": "1+1", "answer": "2",
                                 "responses": ["\\boxed{2}", "\\boxed{3}", "\\boxed{2}", "\\boxed{5}"]}) + "\n")
    s = score_file(inp, ArenaScorer(judge=AlwaysA()), tmp_path / "out.jsonl")
    got = {r["id"]: r for r in rows(tmp_path / "out.jsonl")}
    assert len(set(got["same"]["rewards"])) > 1  # the tournament made the routed group's rewards diverse
    assert (s.non_diverse_fraction, s.non_diverse_source) == (0.5, "routed")  # as the arena decided it
    judge = json.loads(manifest_path(tmp_path / "out.jsonl").read_text())["judge"]
    assert judge.endswith("AlwaysA:always-a")  # a backend instance is recorded by class and model


@pytest.mark.parametrize("scorer, opt, msg", [
    ("verifier", "timeout=0", "option 'timeout': must be > 0, got 0.0"),
    ("verifier", "timeout=-1", "option 'timeout': must be > 0, got -1.0"),
    ("verifier", "timeout=nan", "option 'timeout': must be a finite number, got 'nan'"),
    ("verifier", "timeout=inf", "option 'timeout': must be a finite number, got 'inf'"),
    ("verifier", "workers=0", "option 'workers': must be >= 1, got 0"),
    ("majority-vote", "answer_timeout=-1", "option 'answer_timeout': must be > 0"),
    ("arena", "max_tokens=0", "option 'max_tokens': must be >= 1, got 0"),
    ("arena", "temperature=-0.5", "option 'temperature': must be >= 0"),
    ("pointwise", "max_tokens=-3", "option 'max_tokens': must be >= 1"),
    ("slices", "threshold=2", "option 'threshold': must lie in [0, 1]"),
    ("critic", "temperature=nan", "option 'temperature': must be a finite number"),
])
def test_invalid_scorer_options_are_a_one_line_cli_error(tmp_path, scorer, opt, msg):
    inp = write_groups(tmp_path / "in.jsonl", "a")
    r = CliRunner().invoke(app, ["score", str(inp), "--out", str(tmp_path / "o.jsonl"), "-s", scorer, "-o", opt])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and msg in r.stderr, r.stderr
    assert not (tmp_path / "o.jsonl").exists()


# ------------------------------------------------------------------ only rewardkit's own files are touched

import stat  # noqa: E402

from rewardkit.runtime.jobs import rejects_path, retry_path  # noqa: E402


def _node(tmp_path, kind):
    """A path of the given kind that is not a rewardkit output (devices only where we may make them)."""
    p = tmp_path / "out.jsonl"
    if kind == "empty file":
        p.write_bytes(b"")
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind in ("null device", "full device"):
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(1, 3 if kind == "null device" else 7))
    elif kind == "link to a fifo":
        os.mkfifo(tmp_path / "pipe")
        p.symlink_to(tmp_path / "pipe")
    elif kind == "link to a rewardkit output":
        real = tmp_path / "real.jsonl"
        score_file(write_groups(tmp_path / "other.jsonl", "xy"), Scripted(), real)
        p.symlink_to(real)
    return p


def _fingerprint(p):
    st = os.lstat(p)
    return stat.S_IFMT(st.st_mode), st.st_rdev, st.st_size, os.readlink(p) if p.is_symlink() else None


@pytest.mark.parametrize("kind", ["empty file", "fifo", "null device", "full device", "link to a fifo",
                                  "link to a rewardkit output"])
def test_an_out_that_is_not_a_rewardkit_regular_file_is_refused_untouched(tmp_path, kind):
    # before: any existing path of size 0 (an empty file, /dev/null, /dev/full, a FIFO) was deleted and
    # replaced by a regular file, and the job exited 0
    inp = write_groups(tmp_path / "in.jsonl", "abc")
    out = _node(tmp_path, kind)
    before = _fingerprint(out)
    for restart in (False, True):
        with pytest.raises(JobError, match="not a regular file|not a rewardkit output"):
            score_file(inp, Scripted(), out, restart=restart)
        assert _fingerprint(out) == before
        assert not manifest_path(out).exists() and not rejects_path(out).exists()


def test_cli_out_dev_null_is_refused_and_the_device_kept(tmp_path):
    inp = write_groups(tmp_path / "in.jsonl", "a")
    r = run_cli("score", inp, "--out", "/dev/null")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "/dev/null: is a character device, not a regular file" in r.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.parametrize("content", [b"", b"my own lock notes\n", b"rewardkit lock"])
def test_a_foreign_lock_file_is_refused_and_not_rewritten(tmp_path, content):
    inp = write_groups(tmp_path / "in.jsonl", "ab")
    out = tmp_path / "out.jsonl"
    lock_path(out).write_bytes(content)
    with pytest.raises(JobError, match="is not a rewardkit lock"):
        score_file(inp, Scripted(), out)
    assert lock_path(out).read_bytes() == content and not out.exists()


def test_a_rewardkit_lock_file_of_an_earlier_job_is_reused(tmp_path):
    inp = write_groups(tmp_path / "in.jsonl", "ab")
    out = tmp_path / "out.jsonl"
    lock_path(out).write_bytes(b"12345")  # what earlier releases wrote: the pid alone
    score_file(inp, Scripted(), out)
    assert not lock_path(out).exists()  # taken over, then removed at the end
    lock_path(out).write_bytes(b"rewardkit lock, pid %10d\n" % 99999)  # what a killed job of this one leaves
    score_file(inp, Scripted(), out, restart=True)
    assert [r["id"] for r in rows(out)] == ["a", "b"] and not lock_path(out).exists()


@pytest.mark.parametrize("side", ["rejects", "retry"])
def test_a_foreign_side_file_is_not_deleted_by_a_fresh_job(tmp_path, side):
    inp = write_groups(tmp_path / "in.jsonl", "ab")
    out = tmp_path / "out.jsonl"
    p = rejects_path(out) if side == "rejects" else retry_path(out)
    p.write_bytes(b"someone else's notes\n")
    with pytest.raises(JobError, match="has no rewardkit manifest, so it is not this job's"):
        score_file(inp, Scripted(), out, skip_bad=True)
    assert p.read_bytes() == b"someone else's notes\n" and not out.exists()


def test_side_files_of_a_rewardkit_output_are_replaced_on_restart(tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"id": "a", "prompt": "p", "responses": ["good"]}) + "\n{bad json\n")
    out = tmp_path / "out.jsonl"
    score_file(inp, Scripted(), out, skip_bad=True)
    assert len(rows(rejects_path(out))) == 1

    class Other(Scripted):
        name = "other"

    write_groups(inp, "ab")
    score_file(inp, Other(), out, restart=True)
    assert not rejects_path(out).exists() and [r["scorer"] for r in rows(out)] == ["other", "other"]


def test_all_records_rejected_names_the_first_and_writes_nothing(tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text("{bad\n[1]\n")
    out = tmp_path / "out.jsonl"
    with pytest.raises(JobError, match=r"all 2 records were rejected \(the first: .*in.jsonl:1: malformed JSON"):
        score_file(inp, Scripted(), out, skip_bad=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]  # before: out.jsonl.lock stayed


# ------------------------------------------------------------------ --retry-failed is atomic at every moment


def _mark_failed(out, every=1):
    """Rewrite a finished output as if every ``every``-th group had timed out (what --retry-failed redoes)."""
    got = rows(out)
    for k, r in enumerate(got):
        if k % every == 0:
            r.update(rewards=[None] * len(r["rewards"]), statuses=["timeout"] * len(r["statuses"]))
    out.write_text("".join(json.dumps(r) + "\n" for r in got))


def test_retry_failed_killed_at_random_moments_never_leaves_duplicate_rows(tmp_path, rollouts_path, reference_output):
    """SIGKILL a real `rewardkit score --retry-failed` again and again: after every kill, OUT holds exactly
    one row per group (before: the retried rows were appended to OUT, and a kill left duplicates)."""
    import random

    out = tmp_path / "out.jsonl"
    assert run_cli("score", rollouts_path, "--out", out, "--batch-size", "8").returncode == 0
    _mark_failed(out)
    want = ids(reference_output)
    rng = random.Random(3)
    kills = landed = 0
    while kills < 8:
        before = (out.stat().st_mtime_ns, out.stat().st_size)
        proc = subprocess.Popen([*CLI, "score", str(rollouts_path), "--out", str(out), "--batch-size", "1",
                                 "--retry-failed"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        wait_for = rng.randint(1, 6)  # retried rows written by this run before the kill
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            journal = retry_path(out).read_bytes().count(b"\n") if retry_path(out).exists() else 0
            if journal >= wait_for or (out.stat().st_mtime_ns, out.stat().st_size) != before:
                break
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.03))  # sometimes inside a write
        os.killpg(proc.pid, signal.SIGKILL)
        finished = proc.wait() == 0
        kills += 1
        landed += not finished
        got = ids(out)
        assert sorted(got) == sorted(want) and len(got) == len(set(got)), f"kill {kills}: duplicate or lost rows"
        if finished:
            _mark_failed(out)
    assert landed >= 4  # the kills interrupted real retries
    r = run_cli("score", rollouts_path, "--out", out, "--retry-failed")
    assert r.returncode == 0, r.stderr
    assert ids(out) == want and not retry_path(out).exists()
    ref = {x["id"]: x for x in rows(reference_output)}
    assert all(x["rewards"] == ref[x["id"]]["rewards"] for x in rows(out))


# ------------------------------------------------------------------ a refused job leaves its folder as it was


sys.path.insert(0, str(ROOT / "benchmarks"))
# the probe's targets and folder listing: it counts what these tests check
from reliability_probe import REFUSED_TARGETS, refused_target  # noqa: E402
from reliability_probe import listing as _listing  # noqa: E402


@pytest.mark.parametrize("what", REFUSED_TARGETS)
def test_a_refused_job_leaves_the_folder_exactly_as_it_was(tmp_path, what):
    """Before: every refused target got an OUT.lock beside it (and a missing folder was created and left)."""
    if what == "null device" and os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    inp, out = refused_target(tmp_path, what)
    before = _listing(tmp_path)
    with pytest.raises(JobError):
        score_file(inp, Scripted(), out, skip_bad=True)
    assert _listing(tmp_path) == before


def test_a_refused_job_under_another_jobs_lock_leaves_it_alone(tmp_path):
    inp = write_groups(tmp_path / "in.jsonl", "abc")
    out = tmp_path / "out.jsonl"
    score_file(inp, Scripted(), out)
    with OutputLock(out):
        before = _listing(tmp_path)
        with pytest.raises(JobError, match="another rewardkit job"):
            score_file(inp, Scripted(), out, restart=True)
        assert _listing(tmp_path) == before


@pytest.mark.parametrize("target", ["/dev/stdout", "/dev/null"])
def test_cli_out_on_a_device_link_or_device_creates_nothing_in_dev(tmp_path, target):
    """Before: `--out /dev/stdout` exited 2 but created /dev/stdout.lock (and rewrote one left there)."""
    lock = Path(target + ".lock")

    def seen():  # a lock an older release left here must stay as it was, too
        st = os.lstat(lock) if os.path.lexists(lock) else None
        return st and (st.st_ino, st.st_mtime_ns, st.st_size)

    before = seen()
    inp = write_groups(tmp_path / "in.jsonl", "a")
    try:
        r = run_cli("score", inp, "--out", target)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert "not a regular file" in r.stderr and seen() == before
    finally:
        if before is None:
            lock.unlink(missing_ok=True)  # keep /dev clean for other tests even when this one fails


def test_cli_says_when_it_creates_the_folder_of_out(tmp_path):
    """Before: `--out /nonexistent/dir/o.jsonl` created the folders without a word."""
    inp = write_groups(tmp_path / "in.jsonl", "ab")
    out = tmp_path / "new" / "deeper" / "o.jsonl"
    r = CliRunner().invoke(app, ["score", str(inp), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert r.stderr.count(f"created folder {tmp_path / 'new'} for --out") == 1
    assert [x["id"] for x in rows(out)] == ["a", "b"] and not lock_path(out).exists()
    r = CliRunner().invoke(app, ["score", str(inp), "--out", str(out)])  # it exists now: nothing to say
    assert r.exit_code == 0 and "created folder" not in r.stderr


def test_a_lone_surrogate_in_any_of_several_references_is_an_error_not_sent():
    from rewardkit.runtime.jobs import score_batch

    g = Group("g", "2+2?", [r"\boxed{4}"], reference=["4", "f\ud800ur"])
    (s,) = score_batch(get_scorer("verifier"), [g])
    assert s.statuses == [Status.ERROR] and "field 'reference' is not valid Unicode" in s.messages[0]


# ------------------------------------------------------------------ rows, failures and summaries, piece by piece

from collections import Counter  # noqa: E402

from rewardkit.runtime.inputs import InputError  # noqa: E402
from rewardkit.runtime.jobs import (  # noqa: E402
    JobSummary,
    _check_scores,
    _failure,
    load_groups,
    output_row,
    score_batch,
)
from rewardkit.types import Cost  # noqa: E402


class Recording(Scripted):
    """``Scripted`` that keeps every batch it was sent, texts included."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.batches = []

    def score(self, groups):
        self.batches.append([list(g.responses) for g in groups])
        return super().score(groups)


def _raise_value_error(text):
    raise ValueError(text)


RAISE_LINE = _raise_value_error.__code__.co_firstlineno + 1  # the `raise` line of the helper above


class Raising:
    """A scorer whose score() calls ``how`` (which raises); the call is on the line after ``def score``."""

    name = "raising"

    def __init__(self, how):
        self.how = how

    def score(self, groups):
        self.how()


SCORE_CALL_LINE = Raising.score.__code__.co_firstlineno + 1


def test_failure_names_the_type_the_collapsed_text_and_the_innermost_raising_line():
    g = Group("g", "p", ["a"])
    text = "first  line\n\tsecond " + "x" * 600
    (s,) = score_batch(Raising(lambda: _raise_value_error(text)), [g])
    # innermost frame: the helper's raise, not the scorer's call of it (the traceback's second frame)
    want = "ValueError: " + ("first line second " + "x" * 600)[:500] + f" (at test_jobs.py:{RAISE_LINE})"
    assert s.messages == [want] and s.statuses == [Status.ERROR] and s.extra == {"exception": True}
    assert RAISE_LINE != SCORE_CALL_LINE
    # raised in another file (the json module) than the scorer that called it: that file is named
    (s,) = score_batch(Raising(lambda: json.loads("{")), [g])
    assert s.messages[0].startswith("JSONDecodeError: ") and " (at decoder.py:" in s.messages[0]
    # an exception that was never raised has no traceback: no place, and nothing else added
    assert _failure(g, KeyError("k")).messages == ["KeyError: 'k'"]


class _Unreadable(Exception):
    def __str__(self):
        raise RuntimeError("no message today")


def test_an_exception_whose_message_cannot_be_read_is_still_one_error_row_and_the_rest_goes_on():
    a, b = Group("a", "p", ["x"]), Group("b", "p", ["y", "z"])

    class OnlyA:
        name = "only-a"

        def score(self, groups):
            if any(g.id == "a" for g in groups):
                raise _Unreadable()
            return [GroupScore(g.id, [1.0] * len(g), ["ok"] * len(g)) for g in groups]

    sa, sb = score_batch(OnlyA(), [a, b])
    assert sa.statuses == [Status.ERROR] and np.isnan(sa.rewards[0])
    assert sa.messages[0].startswith("_Unreadable: (its message could not be read: RuntimeError) (at test_jobs.py:")
    assert sb.statuses == ["ok", "ok"] and list(sb.rewards) == [1.0, 1.0]


def test_check_scores_refuses_a_wrong_count_or_a_score_of_another_group():
    a, b = Group("a", "p", ["x", "y"]), Group("b", "p", ["x"])
    sa, sb = GroupScore("a", [1.0, 0.0], ["ok", "ok"]), GroupScore("b", [1.0], ["ok"])
    assert _check_scores([a, b], [sa, sb]) == [sa, sb]
    with pytest.raises(RuntimeError, match="scorer returned 1 scores for 2 groups"):
        _check_scores([a, b], [sa])
    with pytest.raises(RuntimeError, match="scorer returned tuple scores for 2 groups"):
        _check_scores([a, b], (sa, sb))
    with pytest.raises(RuntimeError, match="does not match group 'b'"):  # the right length, another group's id
        _check_scores([a, b], [sa, GroupScore("c", [1.0], ["ok"])])
    with pytest.raises(RuntimeError, match="does not match group 'b'"):  # the right id, another length
        _check_scores([a, b], [sa, GroupScore("b", [1.0, 1.0], ["ok", "ok"])])


@pytest.mark.parametrize("field, kw, at", [
    ("id", {"id": "i\ud800d"}, 1),
    ("prompt", {"prompt": "pr\ud800"}, 2),
    ("reference", {"reference": ["4", "f\ud800ur"]}, 3),  # the references joined by one newline: "4\nf" + ...
    ("expert", {"expert": "\ud800"}, 0),
])
def test_a_lone_surrogate_in_a_group_field_names_the_field_and_is_not_sent(field, kw, at):
    base = {"id": "g", "prompt": "p", "responses": ["good", "bad"]}
    g = Group(**{**base, **kw})
    sc = Recording()
    ok, s = score_batch(sc, [Group("ok", "p", ["good"]), g])
    assert ok.statuses == [Status.OK] and sc.batches == [[["good"]]]  # only the clean group went out
    assert s.statuses == [Status.ERROR] * 2 and np.isnan(s.rewards).all()
    assert s.messages == [f"field {field!r} is not valid Unicode text (lone surrogate at character {at})"] * 2


def test_no_scorer_call_when_every_group_of_a_batch_is_refused():
    sc = Recording()
    (s,) = score_batch(sc, [Group("g", "p\udc80", ["good"])])
    assert s.statuses == [Status.ERROR] and sc.seen == [] and sc.batches == []


def test_a_lone_surrogate_in_a_response_is_sent_repaired_and_marked_error():
    sc = Recording()
    (s,) = score_batch(sc, [Group("g", "p", ["good", "x\udc80good", "bad"])])
    assert sc.batches == [[["good", "x?good", "bad"]]]  # UTF-8 "replace" writes "?" for the surrogate
    assert s.statuses == [Status.OK, Status.ERROR, Status.OK]
    assert s.rewards[0] == 1.0 and np.isnan(s.rewards[1]) and s.rewards[2] == 0.0  # not the 1.0 "x?good" got
    assert s.messages == [None, "response is not valid Unicode text (lone surrogate at character 1)", None]


def test_output_row_keys_step_labels_and_texts():
    g = Group("g", "2+2?", ["4", "5"], reference=["4", "four"], labels=[True, False], metadata={"step": 7})
    s = GroupScore("g", [1.0, 0.0], ["ok", "ok"])
    row = output_row(g, s, "sc")
    assert list(row)[:3] == ["id", "step", "scorer"] and (row["id"], row["step"], row["scorer"]) == ("g", 7, "sc")
    assert row["correct"] == [True, False] and row["rewards"] == [1.0, 0.0]
    assert not {"prompt", "responses", "reference"} & set(row)  # texts only when asked for
    row = output_row(g, s, "sc", with_texts=True)
    assert (row["prompt"], row["responses"]) == ("2+2?", ["4", "5"])
    assert type(row["reference"]) is list and row["reference"] == ["4", "four"]
    g = Group("h", "p", ["a"], reference="42")  # no step, no labels, one reference: kept as it is
    row = output_row(g, GroupScore("h", [0.0], ["ok"]), "sc", with_texts=True)
    assert "step" not in row and "correct" not in row and row["reference"] == "42"
    row = output_row(Group("n", "p", ["a"]), GroupScore("n", [0.0], ["ok"]), "sc", with_texts=True)
    assert row["reference"] is None and row["responses"] == ["a"]
    assert list(output_row(Group("x", "p", ["a"]), GroupScore("y", [0.0], ["ok"]), "sc"))[0] == "id"
    assert output_row(Group("x", "p", ["a"]), GroupScore("y", [0.0], ["ok"]), "sc")["id"] == "x"  # the group's id


def test_a_row_json_cannot_hold_becomes_an_error_row_of_that_group():
    g = Group("g", "p", ["a", "b"], labels=[True, True])
    s = GroupScore("g", [1.0, 1.0], ["ok", "ok"], cost=Cost(seconds=float("nan")))
    row = output_row(g, s, "sc")
    assert row["statuses"] == ["error", "error"] and row["rewards"] == [None, None] and row["exception"] is True
    assert row["messages"][0].startswith("ValueError: Out of range float values are not JSON compliant")
    assert row["correct"] == [True, True] and row["id"] == "g"
    json.dumps(row, allow_nan=False)


def test_score_file_rows_with_texts_and_the_summary_counts(tmp_path):
    inp = write_groups(tmp_path / "in.jsonl", "abcde")
    out = tmp_path / "out.jsonl"
    starts, batches = [], []
    s = score_file(inp, Scripted(), out, batch_size=2, with_texts=True, limit=3,
                   on_start=lambda *a: starts.append(a), on_batch=batches.append)
    assert [r["prompt"] for r in rows(out)] == ["p a", "p b", "p c"]
    assert rows(out)[0]["responses"] == ["good", "bad"]
    assert starts == [(3, 0)] and batches == [2, 1] and (s.scored_now, s.skipped_done, s.groups) == (3, 0, 3)
    s = score_file(inp, Scripted(), out, batch_size=2, with_texts=True,
                   on_start=lambda *a: starts.append(a), on_batch=batches.append)
    assert starts[1] == (5, 3) and batches[2:] == [2] and (s.scored_now, s.skipped_done, s.groups) == (2, 3, 5)


def test_summary_counts_exceptions_and_rejects(tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"id": i, "prompt": "p", "responses": ["good"]}) + "\n" for i in "abc")
                   + "{bad\n")
    s = score_file(inp, Scripted(boom="ac"), tmp_path / "out.jsonl", skip_bad=True)
    assert (s.exceptions, s.rejected) == (2, 1)
    assert s.first_exception.startswith("group 'a': ZeroDivisionError: division by zero")


def test_an_os_error_while_scoring_keeps_the_rows_and_says_so(tmp_path):
    inp = write_groups(tmp_path / "in.jsonl", "abcd")
    out = tmp_path / "out.jsonl"

    def full(n):
        raise OSError(28, "No space left on device", str(out))

    with pytest.raises(JobError, match=r"No space left on device; rows written so far are kept, re-run to resume"):
        score_file(inp, Scripted(), out, batch_size=2, on_batch=full)
    assert [r["id"] for r in rows(out)] == ["a", "b"]


def test_an_executor_with_an_extra_batch_is_out_of_order(tmp_path):
    inp = write_groups(tmp_path / "in.jsonl", "ab")
    sc = Scripted()

    def extra(batches):
        pending = list(batches)
        for b in pending + pending:
            yield b, sc.score(b)

    with pytest.raises(RuntimeError, match="out of input order"):
        score_file(inp, sc, tmp_path / "out.jsonl", executor=extra)


def test_a_retry_writes_its_rows_to_the_journal_never_to_out(tmp_path):
    inp = write_groups(tmp_path / "in.jsonl", "abcd")
    out = tmp_path / "out.jsonl"
    score_file(inp, Scripted(fail="ac"), out, batch_size=1)
    seen = []
    score_file(inp, Scripted(), out, batch_size=1, retry_failed=True,
               on_batch=lambda n: seen.append((len(rows(out)), len(rows(retry_path(out))))))
    assert seen == [(4, 1), (4, 2)]  # OUT keeps one row per group while the retry runs
    assert [r["statuses"] for r in rows(out)] == [["ok", "ok"]] * 4 and not retry_path(out).exists()


def _flat(path, recs):
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_load_groups_passes_its_reading_options_on(tmp_path):
    flat = _flat(tmp_path / "flat.jsonl", [{"qid": q, "prompt": "same", "response": r} for q, r in
                                           [("a", "1"), ("b", "2"), ("a", "3")]])
    groups, bad = load_groups(flat, group_key="qid")
    assert [(g.id, g.responses) for g in groups] == [("a", ["1", "3"]), ("b", ["2"])] and bad == []
    with pytest.raises(InputError, match="responses"):  # a flat row read as grouped has no responses list
        load_groups(flat, fmt="grouped")
    own = _flat(tmp_path / "own.jsonl", [{"id": "q", "question_text": "Q?", "responses": ["x"]}])
    (g,), _ = load_groups(own, fields={"prompt": "question_text"})
    assert g.prompt == "Q?"
    (g,), _ = load_groups(tmp_path / "named-but-absent.jsonl", source=own, fields={"prompt": "question_text"})
    assert g.id == "q"
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text('{"id": "a", "prompt": "p", "responses": ["x"]}\n{bad\n')
    with pytest.raises(InputError, match="mixed.jsonl:2"):  # bad records are refused unless skip_bad
        load_groups(mixed)
    groups, bad = load_groups(mixed, skip_bad=True)
    assert [g.id for g in groups] == ["a"] and [b.line for b in bad] == [2]
    many = write_groups(tmp_path / "many.jsonl", "abcd")
    assert [g.id for g in load_groups(many, limit=2)[0]] == ["a", "b"] and load_groups(many, limit=4)[1] == []


@pytest.mark.parametrize("limit", [0, -1])
def test_load_groups_refuses_a_limit_below_one(tmp_path, limit):
    """Before: limit 0 or -1 read one group (the check came after the first append), so `rewardkit eval accuracy
    --limit 0` reported on one problem as if asked."""
    many = write_groups(tmp_path / "many.jsonl", "abcd")
    with pytest.raises(JobError, match=f"--limit must be a positive integer, got {limit}"):
        load_groups(many, limit=limit)


def test_summarize_counts_statuses_reasons_rewards_and_cost():
    r1 = {"id": "a", "rewards": [1.0, None, None], "statuses": ["ok", "error", "error"],
          "messages": ["fine", "B judge down", "A bad answer"], "cost": {"judge_calls": 2, "seconds": 1.5}}
    r2 = {"id": "b", "rewards": [None, 0.0, 0.0], "statuses": ["error", "ok", "ok"],
          "messages": ["A bad answer", None, None], "cost": {"judge_calls": 3, "unknown_field": 9}}
    r3 = {"id": "c", "rewards": [None, None], "statuses": ["timeout", "timeout"], "messages": [None, "slow"]}
    r4 = {"id": "d", "rewards": [1, 1], "statuses": ["ok", "ok"]}
    s = summarize([r1, r2, r3, r4])
    assert s.groups == 4 and s.statuses == Counter(ok=5, error=3, timeout=2)
    assert s.reasons == {"error": Counter({"A bad answer": 2, "B judge down": 1}), "timeout": Counter(slow=1)}
    assert s.reward_mean == pytest.approx((1 + 0 + 0 + 1 + 1) / 5)
    # non-diverse by rewards: a (one ok reward), b (0, 0), d (1, 1); c has none to compare
    assert (s.non_diverse_fraction, s.non_diverse_source) == (3 / 4, "rewards")
    assert s.cost == Cost(judge_calls=5, seconds=1.5)
    d = s.to_dict()
    assert d["statuses"] == {"ok": 5, "error": 3, "timeout": 2} and type(d["statuses"]) is dict
    assert d["reasons"] == {"error": "A bad answer", "timeout": "slow"}  # each status's most common reason
    assert d["cost"] == Cost(judge_calls=5, seconds=1.5).to_dict() and d["groups"] == 4
    assert json.loads(json.dumps(d)) == d


def test_summarize_of_rows_without_rewards_or_statuses_and_of_none():
    s = summarize([{"id": "a"}, {"id": "b", "rewards": [None], "statuses": ["error"]}])
    assert s.groups == 2 and s.reward_mean is None and s.statuses == Counter(error=1) and s.reasons == {}
    assert s.non_diverse_fraction == 0.0 and s.cost == Cost()
    s = summarize([])
    assert (s.groups, s.reward_mean, s.non_diverse_fraction) == (0, None, None)
    assert JobSummary().to_dict()["reasons"] == {}


def test_a_retry_skips_a_row_that_has_no_statuses(tmp_path):
    inp = write_groups(tmp_path / "in.jsonl", "ab")
    out = tmp_path / "out.jsonl"
    score_file(inp, Scripted(fail="b"), out)
    got = rows(out)
    del got[0]["statuses"]  # a row edited by hand: nothing in it says it failed
    out.write_text("".join(json.dumps(r) + "\n" for r in got))
    sc = Scripted()
    s = score_file(inp, sc, out, retry_failed=True)
    assert sc.seen == ["b"] and s.retried == 1


# ---- score_file / _run_job / positive_int / summarize: each option reaches the job

import threading  # noqa: E402

from rewardkit.runtime.jobs import positive_int  # noqa: E402


def test_positive_int_reads_a_command_line_number_and_names_the_flag_when_refused():
    assert positive_int("--limit", " 12 ") == 12 and positive_int("--batch-size", 3) == 3
    for flag, value in [("--limit", "a"), ("--limit", "0x10"), ("--batch-size", 0), ("--batch-size", -2),
                        ("--limit", True), ("--limit", 2.5), ("--limit", "1.5")]:
        with pytest.raises(JobError) as e:
            positive_int(flag, value)
        assert str(e.value) == f"{flag} must be a positive integer, got {value}"


def test_score_file_refuses_a_batch_size_or_limit_below_one_naming_the_flag(tmp_path):
    inp = write_groups(tmp_path / "in.jsonl", "ab")
    out = tmp_path / "out.jsonl"
    for kw, msg in [({"batch_size": 0}, "--batch-size must be a positive integer, got 0"),
                    ({"limit": 0}, "--limit must be a positive integer, got 0"),
                    ({"limit": "x"}, "--limit must be a positive integer, got x")]:
        with pytest.raises(JobError) as e:
            score_file(inp, Scripted(), out, **kw)
        assert str(e.value) == msg
    assert not out.exists()
    s = score_file(inp, Scripted(), out, batch_size=" 1 ", limit="1")  # a command line's text
    assert ids(out) == ["a"] and s.groups == 1


def test_score_file_defaults_batch_16_no_texts_and_bad_records_refused(tmp_path):
    inp = write_groups(tmp_path / "in.jsonl", [f"g{i}" for i in range(17)])
    batches = []
    score_file(inp, Scripted(), tmp_path / "out.jsonl", on_batch=batches.append)
    assert batches == [16, 1]
    assert set(rows(tmp_path / "out.jsonl")[0]) & {"prompt", "responses", "reference"} == set()
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text('{"id": "a", "prompt": "p", "responses": ["good"]}\n{bad\n')
    with pytest.raises(InputError, match="mixed.jsonl:2"):
        score_file(mixed, Scripted(), tmp_path / "m.jsonl")


def test_score_file_passes_group_key_format_fields_and_texts_to_the_reader_and_the_manifest(tmp_path):
    recs = [{"qid": "a", "task_text": "Q a", "response": "good"}, {"qid": "b", "task_text": "Q b", "response": "bad"},
            {"qid": "a", "task_text": "Q a", "response": "bad"}]
    flat = _flat(tmp_path / "flat.jsonl", recs)
    out = tmp_path / "out.jsonl"
    s = score_file(flat, Scripted(), out, group_key="qid", fmt="flat", fields={"prompt": "task_text"},
                   with_texts=True)
    got = rows(out)
    assert [(r["id"], r["prompt"], r["responses"], r["rewards"]) for r in got] == [
        ("a", "Q a", ["good", "bad"], [1.0, 0.0]), ("b", "Q b", ["bad"], [0.0])]
    assert s.groups == 2
    m = json.loads(manifest_path(out).read_text())
    assert (m["format"], m["group_key"], m["fields"], m["with_texts"]) == ("flat", "qid", {"prompt": "task_text"}, True)
    assert m["input"] == {"path": str(flat.resolve()), "sha256": hashlib.sha256(flat.read_bytes()).hexdigest()}
    with pytest.raises(InputError, match="responses"):  # flat rows read as grouped have no responses list
        score_file(flat, Scripted(), tmp_path / "g.jsonl", group_key="qid", fmt="grouped")
    assert not (tmp_path / "g.jsonl").exists()


def test_score_file_reads_through_a_link_and_a_dataset_folder_and_names_an_unnamed_scorer(tmp_path):
    class Anon:  # a scorer with no ``name``
        def score(self, groups):
            return Scripted().score(groups)

    inp = write_groups(tmp_path / "in.jsonl", "ab")
    link = tmp_path / "link.jsonl"
    link.symlink_to(inp)
    score_file(link, Anon(), tmp_path / "out.jsonl")
    assert [(r["id"], r["scorer"]) for r in rows(tmp_path / "out.jsonl")] == [("a", "Anon"), ("b", "Anon")]
    from datasets import Dataset

    folder = tmp_path / "ds"
    Dataset.from_list([{"id": "x", "prompt": "p", "responses": ["bad", "good"]}]).save_to_disk(str(folder))
    s = score_file(folder, Scripted(), tmp_path / "ds.jsonl")
    assert [(r["id"], r["rewards"]) for r in rows(tmp_path / "ds.jsonl")] == [("x", [0.0, 1.0])] and s.groups == 1


def test_an_out_that_is_the_input_is_refused_with_the_input_named(tmp_path):
    inp = write_groups(tmp_path / "in.jsonl", "ab")
    with pytest.raises(JobError) as e:
        score_file(inp, Scripted(), inp)
    assert str(e.value) == f"{inp}: --out would write over or into the input {inp}; choose another --out"


def test_an_empty_input_has_no_groups_to_score(tmp_path):
    inp = tmp_path / "empty.jsonl"
    inp.write_text("")
    with pytest.raises(JobError) as e:
        score_file(inp, Scripted(), tmp_path / "out.jsonl")
    assert str(e.value) == f"{inp}: no groups to score: it holds no records"


def test_an_os_error_before_scoring_is_one_line_without_the_resume_hint(tmp_path):
    inp = write_groups(tmp_path / "in.jsonl", "ab")
    out = tmp_path / "new" / "out.jsonl"

    def refuse(folder):
        raise PermissionError(13, "Permission denied")

    with pytest.raises(JobError) as e:
        score_file(inp, Scripted(), out, on_mkdir=refuse)
    assert str(e.value) == f"{out}: Permission denied"
    assert not (tmp_path / "new").exists()  # the folder made for the job went again with it


class _Fifo:
    """A FIFO holding ``data`` with its writer already gone (a finished ``<(cmd)``); a helper thread gives a
    reader stuck waiting for a writer an empty one, so a wrong read fails instead of hanging."""

    def __init__(self, path, data):
        self.path = path
        os.mkfifo(path)
        self.keep = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # holds the pipe (and its data) open
        if data:
            w = os.open(path, os.O_WRONLY)
            os.write(w, data)
            os.close(w)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._unstick, daemon=True)
        self.thread.start()

    def _unstick(self):
        while not self.done.wait(2):
            try:
                os.close(os.open(self.path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass

    def close(self):
        self.done.set()
        self.thread.join()
        os.close(self.keep)


def test_a_piped_input_is_spooled_once_scored_and_its_hash_recorded(tmp_path):
    data = "".join(json.dumps({"id": i, "prompt": f"p {i}", "responses": ["good", "bad"]}) + "\n"
                   for i in "abc").encode()
    fifo = _Fifo(tmp_path / "in.fifo", data)
    out = tmp_path / "new" / "out.jsonl"
    made, batches = [], []
    try:
        s = score_file(fifo.path, Scripted(), out, batch_size=2, limit=2, with_texts=True, on_mkdir=made.append,
                       on_batch=batches.append)
    finally:
        fifo.close()
    got = rows(out)
    assert [(r["id"], r["scorer"], r["prompt"], r["rewards"]) for r in got] == [
        ("a", "scripted", "p a", [1.0, 0.0]), ("b", "scripted", "p b", [1.0, 0.0])]
    assert made == [tmp_path / "new"] and batches == [2] and (s.groups, s.scored_now) == (2, 2)
    m = json.loads(manifest_path(out).read_text())
    assert m["input"] == {"path": str(fifo.path), "sha256": hashlib.sha256(data).hexdigest()}
    assert m["with_texts"] is True and not lock_path(out).exists()


def test_an_empty_pipe_has_no_groups_and_says_its_writer_may_not_have_been_open(tmp_path):
    fifo = _Fifo(tmp_path / "in.fifo", b"")
    try:
        with pytest.raises(JobError) as e:
            score_file(fifo.path, Scripted(), tmp_path / "out.jsonl")
    finally:
        fifo.close()
    assert str(e.value) == f"{fifo.path}: no groups to score: it holds no records (a pipe: was its writer open?)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.fifo"]
