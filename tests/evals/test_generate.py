"""`rewardkit eval generate`: a scripted backend for resumability and failures, the embedded model once."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from rewardkit.cli.app import app
from rewardkit.evals.generate import generate_rollouts
from rewardkit.evals.loaders import MATH_INSTRUCTION, load_benchmark
from typer.testing import CliRunner

from rewardkit.backends import Completion, JudgeBackend
from rewardkit.runtime.output import JobError
from rewardkit.types import Status


class Scripted(JudgeBackend):
    """Answers every request with n copies of a boxed guess; fails the problems listed in ``fail``."""

    model_id = "scripted"

    def __init__(self, fail=()):
        self.fail, self.seen = set(fail), []

    def generate(self, requests):
        out = []
        for r in requests:
            self.seen.append(r)
            if any(f in r.messages[-1]["content"] for f in self.fail):
                out.append(Completion([], Status.TIMEOUT, error="deadline"))
            else:
                out.append(Completion([f"... \\boxed{{{70 + s}}}" for s in range(r.n)], finish_reasons=["stop"] * r.n))
        return out

    def verdict_probs(self, requests):
        raise NotImplementedError


def test_generate_resumes_and_never_writes_failed_problems(tmp_path):
    probs = load_benchmark("aime25", limit=3)
    out = tmp_path / "r.jsonl"
    be = Scripted(fail=[probs[1].question[:40]])
    s = generate_rollouts(probs, be, out, n=2, batch_size=2)
    assert s.generated_now == 2 and len(s.failed) == 1 and probs[1].id in s.failed[0]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == [probs[0].id, probs[2].id]
    # aime2025-I-01's answer is 70: the first sample is correct, labelled by the verifier
    assert rows[0]["correct"] == [True, False] and rows[0]["responses"][0].endswith("\\boxed{70}")
    assert be.seen[0].messages[0]["content"].endswith(MATH_INSTRUCTION) and be.seen[0].n == 2
    # re-run: only the failed problem is asked again
    be2 = Scripted()
    s2 = generate_rollouts(probs, be2, out, n=2)
    assert s2.skipped_done == 2 and s2.generated_now == 1 and len(be2.seen) == 1
    assert sorted(json.loads(line)["id"] for line in out.read_text().splitlines()) == sorted(p.id for p in probs)


def test_generate_cli_unknown_benchmark(tmp_path):
    r = CliRunner().invoke(app, ["eval", "generate", "smollm2", "math5000", "--out", str(tmp_path / "x.jsonl")])
    assert r.exit_code == 2 and "unknown benchmark 'math5000'" in r.output


@pytest.mark.model
def test_generate_cli_with_the_embedded_model_then_accuracy(tmp_path, judge_backend):
    out = tmp_path / "gsm.jsonl"
    args = ["eval", "generate", "smollm2", "gsm8k", "--n", "2", "--limit", "1", "--max-tokens", "8", "--out", str(out)]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [len(r["responses"]) for r in rows] == [2] and all(len(r["correct"]) == 2 for r in rows)
    r = CliRunner().invoke(app, args)
    assert "resuming: 1 of 1" in r.output and len(out.read_text().splitlines()) == 1
    r = CliRunner().invoke(app, ["eval", "accuracy", str(out), "--out", str(tmp_path)])
    assert r.exit_code == 0 and json.loads((tmp_path / "accuracy.json").read_text())["n"] == 2


def test_a_second_writer_is_refused(tmp_path):
    from rewardkit.runtime.output import JobError, OutputLock

    out = tmp_path / "r.jsonl"
    with OutputLock(out), pytest.raises(JobError, match="another rewardkit job"):
        generate_rollouts(load_benchmark("aime24", limit=1), Scripted(), out, n=1)
    assert not out.exists() or out.read_text() == ""


# ------------------------------------------------------------------ the output's owner (issue 35)

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv.pop(1)); import conftest; "
       "from rewardkit.cli.app import main; main()", str(ROOT)]
MINE = b'{"id": "mine-1", "note": "my data"}\n{"id": "mine-2", "note": "the last record, no newline"}'


def _listing(folder: Path) -> list:
    return sorted((str(p.relative_to(folder)), p.read_bytes() if p.is_file() else None) for p in folder.rglob("*"))


def test_cli_generate_refuses_a_file_no_rewardkit_job_wrote_and_leaves_it_byte_identical(tmp_path):
    """Issue 35's repro. Before: the last record (no trailing newline) was cut away and a generated row appended
    to the user's data, exit 0."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from reliability_probe import recording_judge

    from rewardkit.http_server import BackgroundServer

    (tmp_path / "mine.jsonl").write_bytes(MINE)
    before = _listing(tmp_path)
    seen: list = []
    with BackgroundServer(recording_judge(seen)) as up:
        r = subprocess.run([*CLI, "eval", "generate", up.url + "/v1", "gsm8k", "--limit", "1", "--n", "1",
                            "--out", "mine.jsonl"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert r.stderr.splitlines() == ["error: mine.jsonl: exists and is not a rewardkit output (no "
                                     "mine.jsonl.manifest.json); left as it is: move it away or choose another --out"]
    assert _listing(tmp_path) == before and (tmp_path / "mine.jsonl").read_bytes() == MINE
    assert seen == []  # refused before the model was asked anything


@pytest.mark.parametrize("content", [MINE, b"", MINE + b"\n"])
def test_generate_never_touches_a_file_without_a_manifest(tmp_path, content):
    out = tmp_path / "r.jsonl"
    out.write_bytes(content)
    be = Scripted()
    with pytest.raises(JobError, match="not a rewardkit output"):
        generate_rollouts(load_benchmark("aime24", limit=1), be, out, n=1)
    assert out.read_bytes() == content and [p.name for p in tmp_path.iterdir()] == ["r.jsonl"] and be.seen == []


def test_generate_resumes_only_its_own_job_and_restarts_on_request(tmp_path):
    probs = load_benchmark("aime24", limit=2)
    out = tmp_path / "r.jsonl"
    generate_rollouts(probs[:1], Scripted(), out, n=1)
    first = out.read_bytes()
    with pytest.raises(JobError, match='written by another job: options .*"n": 1.*now .*"n": 2'):
        generate_rollouts(probs, Scripted(), out, n=2)  # other sampling settings: not this job's rows
    assert out.read_bytes() == first
    s = generate_rollouts(probs, Scripted(), out, n=1)  # the same job: resumed
    assert (s.skipped_done, s.generated_now) == (1, 1)
    s = generate_rollouts(probs, Scripted(), out, n=2, restart=True)
    assert s.generated_now == 2 and all(len(json.loads(x)["responses"]) == 2 for x in out.read_text().splitlines())


def test_generate_takes_the_output_its_caller_claimed_only_for_the_same_settings(tmp_path):
    from rewardkit.evals.generate import claim_output

    probs, be, out = load_benchmark("aime24", limit=2), Scripted(), tmp_path / "r.jsonl"
    claimed = claim_output(out, be, n=1, max_tokens=64, temperature=0.7, top_p=0.95, seed=0, grade=True)
    with pytest.raises(ValueError, match="claimed for other settings"):
        generate_rollouts(probs, be, claimed, n=2, max_tokens=64)  # n differs from the claim's
    assert not out.exists() and be.seen == []
    s = generate_rollouts(probs, be, claimed, n=1, max_tokens=64)
    assert s.generated_now == 2 and [json.loads(x)["id"] for x in out.read_text().splitlines()] == [p.id for p in probs]


def test_generate_never_writes_over_its_benchmark_file(tmp_path):
    bench = tmp_path / "bench.jsonl"
    bench.write_text(json.dumps({"id": "q1", "problem": "1+1?", "answer": "2"}) + "\n")
    before = bench.read_bytes()
    with pytest.raises(JobError, match="would write over or into the input"):
        generate_rollouts(load_benchmark(bench), Scripted(), bench, n=1, bench=str(bench))
    assert bench.read_bytes() == before
