"""``JobOutput``, the one owner of a job's ``--out`` (``score`` and ``eval generate``): a path that names a folder
is refused creating nothing; rows done, appends, the retry journal and its atomic merge keep one row per id."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rewardkit.runtime.output import (
    JobError,
    JobOutput,
    lock_path,
    manifest_path,
    output_manifest,
    retry_path,
)

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv.pop(1)); import conftest; "
       "from rewardkit.cli.app import main; main()", str(ROOT)]


def _listing(folder: Path) -> list:
    return sorted((str(p.relative_to(folder)), p.is_dir(), p.read_bytes() if p.is_file() else None)
                  for p in folder.rglob("*"))


class _Scripted:
    name = "scripted"

    def score(self, groups):
        from rewardkit.types import GroupScore, Status

        return [GroupScore(g.id, [1.0] * len(g), [Status.OK] * len(g)) for g in groups]


@pytest.mark.parametrize("raw", ["nd1/x/", "nd1/x/.", "nd1/x//", "x/"])
def test_a_path_that_names_a_folder_is_refused_and_nothing_is_created(tmp_path, raw):
    """Before: `--out nd1/x/` created nd1/ and wrote a file `x` (pathlib drops the trailing '/')."""
    from rewardkit.runtime.jobs import score_file

    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"id": "a", "prompt": "p", "responses": ["r"]}) + "\n")
    before = _listing(tmp_path)
    with pytest.raises(JobError, match="names a folder|is a directory"):
        score_file(inp, _Scripted(), f"{tmp_path}/{raw}")
    assert _listing(tmp_path) == before


@pytest.mark.parametrize("command", [["score", "in.jsonl"], ["eval", "generate", "smollm2", "aime24", "--limit", "1"]])
def test_cli_out_with_a_trailing_slash_is_one_error_line_and_exit_2(tmp_path, command):
    """Before: `rewardkit score in.jsonl --out nd1/x/` exited 0 and wrote the file nd1/x."""
    (tmp_path / "in.jsonl").write_text(json.dumps({"id": "a", "prompt": "p", "responses": ["r"]}) + "\n")
    before = _listing(tmp_path)
    r = subprocess.run([*CLI, *command, "--out", "nd1/x/"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert r.stderr.splitlines() == ["error: nd1/x/: names a folder (a path ending in '/', '.' or '..'); "
                                     "--out must be a file"]
    assert _listing(tmp_path) == before  # no nd1/, no x


def test_rows_done_appends_and_the_retry_merge_keep_one_row_per_id(tmp_path):
    out = tmp_path / "sub" / "o.jsonl"
    m = output_manifest("score", "scripted", {}, None, None)
    made = []
    with JobOutput(out, m).claim().open(on_mkdir=made.append) as o:
        assert made == [tmp_path / "sub"] and manifest_path(out).exists() and lock_path(out).exists()
        assert o.done() == {}
        o.append([{"id": "a", "v": 1}, {"id": "b", "v": 1}])
    assert not lock_path(out).exists()
    out.write_bytes(out.read_bytes() + b'{"id": "c", "v"')  # a kill half-way through a line
    with JobOutput(out, m).claim().open() as o:
        assert o.done() == {"a": {"id": "a", "v": 1}, "b": {"id": "b", "v": 1}}
        o.append([{"id": "a", "v": 2}], journal=True)  # a retry: into the journal, never into OUT
        assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == ["a", "b"]
        assert json.loads(retry_path(out).read_text()) == {"id": "a", "v": 2}
        rows = o.merge(["b", "a"])
    assert rows == [{"id": "b", "v": 1}, {"id": "a", "v": 2}]
    assert [json.loads(x) for x in out.read_text().splitlines()] == rows and not retry_path(out).exists()


def test_another_jobs_output_and_a_foreign_file_are_refused_untouched(tmp_path):
    out = tmp_path / "o.jsonl"
    with JobOutput(out, output_manifest("generate", None, {"n": 1}, None, None)).claim().open() as o:
        o.append([{"id": "a"}])
    before = _listing(tmp_path)
    with pytest.raises(JobError, match="written by another job"):
        JobOutput(out, output_manifest("generate", None, {"n": 2}, None, None)).claim()
    with pytest.raises(JobError, match="written by another job: job"):  # a score job on a rollouts file
        JobOutput(out, output_manifest("score", None, {"n": 1}, None, None)).claim()
    assert _listing(tmp_path) == before
    (tmp_path / "mine.jsonl").write_bytes(b'{"id": "mine-1"}')
    before = _listing(tmp_path)
    with pytest.raises(JobError, match="not a rewardkit output"):
        JobOutput(tmp_path / "mine.jsonl", output_manifest("generate", None, {}, None, None)).claim()
    assert _listing(tmp_path) == before
